"""The bench's multi-host row, its pure parts: when it runs, each host's `up` argv (parsed by `up`'s
own parser), the gateway's inventory (parsed by the gateway's), and the report's ratio."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import multihost, names, targets
from bench.k6run import K6Result
from bench.report import Row
from bench.session import Bench, Plan
from bench.targets import ENGINE, Hardware
from bench.write_report import comparisons, headline
from hunyuan_serve.cli import build_parser
from hunyuan_serve.config import config_from_args
from hunyuan_serve.families import HUNYUAN_SAMPLING
from hunyuan_serve.gateway.inventory import parse_inventory

CPU, GPU2, GPU1 = Hardware(), Hardware(("5", "GPU-x")), Hardware(("0",))


@pytest.mark.parametrize(
    ("hw", "cores", "netns_why", "expected"),
    [
        (CPU, [0, 1], None, None),
        (CPU, [3], None, "1 CPU core(s): two hosts need one each"),
        (GPU1, [0, 1], None, "1 GPU(s): two hosts need one each"),
        (GPU2, [0], None, None),
        (CPU, [0, 1], "not root", "no network namespaces: not root"),
    ],
)
def test_when_two_hosts_can_be_benched(
    hw: Hardware, cores: list[int], netns_why: str | None, expected: str | None
) -> None:
    assert multihost.unavailable(hw, cores, netns_why) == expected


def test_each_host_runs_one_replica_on_its_own_core_or_gpu_behind_the_secret(tmp_path: Path) -> None:
    secret = tmp_path / "peer.secret"
    assert multihost.host_prefix(CPU, 1, [7, 2]) == ["taskset", "--cpu-list", "7"]
    assert multihost.host_prefix(GPU2, 1, [0, 1]) == []
    for hw, index, gpus in ((CPU, 1, None), (GPU2, 1, ("GPU-x",)), (GPU2, 0, (5,))):
        argv = multihost.host_argv(Path("/m"), tmp_path / "run", hw, index, "10.77.3.11", secret)
        assert argv[:4] == [*targets.HUNYUAN, "up"]
        cfg = config_from_args(build_parser().parse_args(argv[3:]))
        assert (cfg.replicas, cfg.gpus) == (1, gpus)
        assert (cfg.replica.host, cfg.nginx.listen, cfg.nginx.port) == ("10.77.3.11", "10.77.3.11", 8080)
        assert (cfg.base_port, cfg.auth.peer_secret_file) == (multihost.REPLICA_PORT, str(secret))
        # The same engine as every other setup of the bench.
        assert all(getattr(cfg.engine, key) == getattr(ENGINE, key) for key in ENGINE.model_fields_set)


def test_the_inventory_is_one_the_gateway_reads(tmp_path: Path) -> None:
    secret = tmp_path / "peer.secret"
    data = multihost.inventory(
        [("a", "http://10.77.3.10:8080"), ("b", "http://10.77.3.11:8080")], secret, 9000
    )
    inv = parse_inventory(data, "bench", tmp_path)
    assert [(h.name, h.url) for h in inv.hosts] == [
        ("a", "http://10.77.3.10:8080"),
        ("b", "http://10.77.3.11:8080"),
    ]
    assert (inv.peer_secret_file, inv.nginx.port, inv.nginx.listen) == (str(secret), 9000, "127.0.0.1")


def _result(rate: float, p95: float) -> K6Result:
    metrics = {
        "http_reqs": {"values": {"count": 100, "rate": rate}},
        "http_req_duration": {"values": {"med": p95 / 2, "p(90)": p95, "p(95)": p95, "p(99)": p95}},
        "failed_requests": {"values": {"rate": 0.0, "passes": 0}},
    }
    return K6Result("r", Path("s.json"), Path("s.csv"), 0, 1.0, metrics, 10.0, None)


def test_the_report_gives_the_ratio_of_two_hosts_to_one(tmp_path: Path) -> None:
    one, two = _result(4.0, 900.0), _result(7.0, 600.0)
    rows = [Row(names.GATEWAY_1, one), Row(names.GATEWAY_2, two)]
    assert comparisons(names.HOSTS, rows, {}) == [("gateway, 2 hosts / gateway, 1 host", two, one)]
    assert comparisons(names.HOSTS, rows[:1], {}) == []
    b = Bench(Plan(), tmp_path, tmp_path, tmp_path, "k6", HUNYUAN_SAMPLING)
    b.results[names.HOSTS] = rows
    assert (
        "- Two hosts vs one behind the gateway (ramp to 100 VUs, one replica per host): 1.75x the "
        "requests/s (7.0 vs 4.0), p95 600 ms vs 900 ms; failed 0 vs 0." in headline(b)
    )
    assert Plan().hosts and not Plan.quick().hosts

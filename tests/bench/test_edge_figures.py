"""The overload's sizing and the edge figures the bench reads from the stack's own Nginx files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import edge, names
from bench.session import Bench, Plan, only, overload_vus
from bench.setups import plan_setups
from bench.targets import Hardware
from hunyuan_serve.config import NginxConfig, build_config
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.run.health import State


@pytest.mark.parametrize(
    ("rate", "replicas", "cap", "hold_s", "expected"),
    [
        (748, 2, 32, 0.5, 64 + 374),  # both replicas full, half a second of refusals
        (748, 2, 256, 0.5, 512 + 374),
        (81, 1, 32, 0.5, 32 + 41),  # a part of a VU is a whole one
        (100, 4, 8, 0.0, 32),
    ],
)
def test_overload_vus_hold_every_replica_full_and_the_refusals(
    rate: int, replicas: int, cap: int, hold_s: float, expected: int
) -> None:
    assert overload_vus(Plan(overload_refusal_vu_s=hold_s), rate, replicas, cap) == expected


def test_only_overload_runs_the_stack_alone() -> None:
    plan = only(Plan(), names.OVERLOAD)
    assert plan.only == names.OVERLOAD and only(Plan(), None) == Plan()
    assert (plan.baselines, plan.one_replica, plan.unequal, plan.hosts) == ((), False, False, False)
    # What sizes the scenario stays as the full plan has it.
    assert (plan.ramp, plan.ramp_vus, plan.overload_duration) == (Plan().ramp, 100, Plan().overload_duration)
    assert plan_setups(Hardware(), 2, plan).steps == (names.STEP_STACK,)
    assert only(Plan.quick(), names.OVERLOAD).overload_duration == Plan.quick().overload_duration


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [({"replica.max_queued": 0}, NginxConfig().cpu_max_conns), ({}, 2304), ({"nginx.max_conns": 0}, 0)],
)
def test_edge_cap_is_read_from_the_rendered_upstream(
    tmp_path: Path, overrides: dict[str, object], expected: int
) -> None:
    cfg = build_config({"engine": {"device": "cpu"}}, overrides)
    routing = routing_from_states([("127.0.0.1:8101", State.READY), ("127.0.0.1:8102", State.EVICTED)])
    conf = tmp_path / "nginx.conf"
    conf.write_text(render_nginx(cfg, routing, prefix=tmp_path, web_root=tmp_path, worker_user=None))
    assert edge.edge_cap(conf) == expected


def test_edge_refusals_are_nginx_own_503s_past_the_offset(tmp_path: Path) -> None:
    def line(status: int, upstream: str, seconds: float) -> str:
        return json.dumps({"status": status, "upstream_addr": upstream, "request_time": seconds}) + "\n"

    log = tmp_path / "access.log"
    log.write_text(line(503, edge.EDGE_UPSTREAM, 9.0))
    offset = edge.log_size(log)
    with log.open("a") as handle:
        handle.write(line(503, edge.EDGE_UPSTREAM, 0.002))
        handle.write(line(503, "127.0.0.1:8101", 0.5))  # a replica's own refusal
        handle.write(line(503, "127.0.0.1:8101, hs_replicas", 0.3))  # tried a replica first
        handle.write(line(200, "127.0.0.1:8102", 0.8))
        handle.write("{half a li\n")
        handle.write(line(503, edge.EDGE_UPSTREAM, 0.0))
    assert edge.edge_refusals_ms(log, offset) == [2.0, 0.0]
    assert edge.log_size(tmp_path / "none.log") == 0


def test_only_overload_is_a_flag_and_writes_its_own_report(tmp_path: Path) -> None:
    from bench.k6run import K6Result
    from bench.run import parse_args
    from bench.write_report import write_report
    from hunyuan_serve.families import SamplingDefaults

    assert parse_args(["--only", "overload"]).only == names.OVERLOAD and parse_args([]).only is None
    with pytest.raises(SystemExit):
        parse_args(["--only", "chaos"])
    sampling = SamplingDefaults(temperature=0.7, top_p=0.6, top_k=20, repetition_penalty=1.05)
    b = Bench(only(Plan(), names.OVERLOAD), tmp_path, tmp_path / "m", tmp_path / "items.json", "k6", sampling)
    metrics = {
        "accepted_latency": {"values": {"count": 300, "p(95)": 900.0}},
        "http_reqs": {"values": {"count": 3000}},
    }
    result = K6Result(
        "overload", tmp_path / "s.json", tmp_path / "s.csv.gz", 0, 31.0, metrics, duration_s=30.0
    )
    b.add(names.OVERLOAD, names.OVERLOADED, result, offered=750)
    b.overload = {"capacity_rps": 75.0, "edge_cap": 32, "vus": 439}
    path = write_report(b, tmp_path / "out", {}, quick=False, hardware=Hardware())
    assert path.name == "report-full-overload.md" and not (tmp_path / "out" / "report-full.md").exists()
    text = path.read_text()
    assert "| 750 | 75 | 32 | 439 | 3000 | 300 | 10.0 |" in text and "10.0 accepted req/s" in text

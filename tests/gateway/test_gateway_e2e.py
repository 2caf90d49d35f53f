"""The gateway for real on loopback: two `up` hosts behind its Nginx, the peer secret, a replica killed."""

# Two `up` hosts (a replica each on the tiny model, the peer secret on), the gateway's Nginx in front;
# requests reach both hosts, a host refuses callers without the secret, and one host's replica killed
# with SIGKILL is evicted at the front while requests still pass.
# One start of the three processes serves the module; eviction and readmission times are printed (-s).
# Host b's replica binds 127.0.0.2, so every place that names a replica's address is seen to use
# replica.host rather than 127.0.0.1.

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import yaml

from hunyuan_serve.edge.dialects import PEER_REFUSED
from hunyuan_serve.run.events import read_events
from hunyuan_serve.run.state import read_state
from tests.support.gateway import GatewayRun
from tests.support.load import Load
from tests.support.stacks import all_routed, cli, free_ports, started, tiny_up, wait_until

START_TIMEOUT_S = 480.0  # two vLLM CPU engines loading on two shared cores
SECRET = "e2e-peer-secret-0123456789abcdef"

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
    pytest.mark.timeout(4 * START_TIMEOUT_S),
]


@dataclass
class Host:
    name: str
    proc: subprocess.Popen[bytes]
    run_dir: Path
    port: int
    replica_addr: str
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        return all_routed(self.run_dir)

    def replica_pid(self) -> int:
        state = read_state(self.run_dir)
        assert state is not None
        return int(state["replicas"][0]["pid"])


@dataclass
class Front(GatewayRun):
    """The gateway over hosts a and b."""

    a: Host
    b: Host
    figures: dict[str, float] = field(default_factory=dict)


@contextlib.contextmanager
def _host(name: str, model: Path, work: Path, secret: Path, replica_host: str, core: int) -> Iterator[Host]:
    port, base = free_ports(2)
    run_dir, log = work / f"run-{name}", work / f"up-{name}.log"
    # Each host on its own core, as on two machines: unpinned, the serving host's engine threads spin on
    # both cores and the killed host's new engine waited 200+ s for CPU to start again.
    argv = ["taskset", "--cpu-list", str(core), *tiny_up(model, run_dir, port, base, max_tokens=8)]
    argv += ["--peer-secret-file", str(secret), "--replica-host", replica_host]
    argv += ["--probe-interval-s", "0.25", "--restart-backoff-base-s", "0.5", "--drain-timeout-s", "5"]
    with started(argv, log=log) as proc:
        yield Host(name, proc, run_dir, port, f"{replica_host}:{base}", log)


def _inventory(work: Path, hosts: list[Host], port: int) -> Path:
    path = work / "inventory.yaml"
    data = {
        "peer_secret_file": "peer.secret",  # relative: read beside the inventory
        "hosts": [{"name": h.name, "url": h.url} for h in hosts],
        "gateway": {"discovery_interval_s": 0.5, "probe_interval_s": 0.25, "unhealthy_threshold": 2},
        "nginx": {"port": port, "worker_processes": 1, "read_timeout_s": 120.0},
    }
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def front(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Front]:
    work = tmp_path_factory.mktemp("gateway")
    secret = work / "peer.secret"
    secret.write_text(SECRET + "\n")
    t0 = time.time()
    with (
        _host("a", tiny_model_dir, work, secret, "127.0.0.1", core=0) as a,
        _host("b", tiny_model_dir, work, secret, "127.0.0.2", core=1 % (os.cpu_count() or 1)) as b,
    ):
        for host in (a, b):
            wait_until(host.proc, host.log, host.ready, START_TIMEOUT_S, f"host {host.name} ready")
        (port,) = free_ports(1)
        run_dir, log = work / "run-gateway", work / "gateway.log"
        argv = cli("gateway", "--inventory", str(_inventory(work, [a, b], port)), "--run-dir", str(run_dir))
        with started(argv, log=log) as proc:
            gateway = Front(proc, run_dir, port, log, a, b)
            wait_until(proc, log, gateway.all_ready, 60, "both hosts' replicas ready at the front")
            gateway.figures["cold start of 2 hosts and the gateway, s"] = round(time.time() - t0, 1)
            try:
                yield gateway
            finally:
                print("\nhunyuan-serve gateway figures:", json.dumps(gateway.figures, indent=1))


def _translate(client: httpx.Client, text: str) -> httpx.Response:
    return client.post("/translate", json={"text": text, "source_lang": "en", "target_lang": "zh"})


def test_requests_through_the_front_are_answered_by_both_hosts(front: Front) -> None:
    with httpx.Client(base_url=front.url, trust_env=False, timeout=120) as client:
        health = client.get("/health").json()
        assert health["ready"] == 2 and health["replicas"] == 2
        assert health["family"] == "hunyuan-mt" and health["model"]
        assert health["hosts"] == {
            "a": {"state": "up", "ready": 1, "replicas": 1, "model": health["model"]},
            "b": {"state": "up", "ready": 1, "replicas": 1, "model": health["model"]},
        }
        for i in range(12):
            response = _translate(client, f"Front door number {i}")
            assert response.status_code == 200, response.text
    served = {
        e["upstream_addr"] for e in front.access_log() if e["uri"] == "/translate" and e["status"] == 200
    }
    assert {front.a.replica_addr, front.b.replica_addr} <= served


def test_a_host_and_its_replica_refuse_callers_without_the_secret(front: Front) -> None:
    refused = {"error": {"code": "peer_refused", "message": PEER_REFUSED}}
    for base in (front.b.url, f"http://{front.b.replica_addr}"):
        with httpx.Client(base_url=base, trust_env=False, timeout=120) as client:
            for headers in ({}, {"X-Hunyuan-Peer": "not-the-secret-0123456789"}):
                client.headers.update(headers)
                for response in (_translate(client, "Hi"), client.get("/health")):
                    assert (response.status_code, response.json()) == (403, refused), (base, headers)
            client.headers["X-Hunyuan-Peer"] = SECRET
            assert _translate(client, "Hi").status_code == 200
            assert client.get("/health").status_code == 200
    deepl = httpx.post(
        front.a.url + "/v2/translate", data={"text": "Hi", "target_lang": "ZH"}, trust_env=False
    )
    assert (deepl.status_code, deepl.json()) == (403, {"message": PEER_REFUSED})


def test_gateway_status_and_host_status_show_every_replica(front: Front) -> None:
    out = subprocess.run(
        cli("gateway", "status", "--json", "--run-dir", str(front.run_dir)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["running"] is True and status["nginx"]["ready"] == 2
    hosts = {h["name"]: h for h in status["hosts"]}
    assert {name: h["state"] for name, h in hosts.items()} == {"a": "up", "b": "up"}
    assert [(r["addr"], r["state"], r["routed"]) for r in hosts["b"]["replicas"]] == [
        (front.b.replica_addr, "ready", True)
    ]
    assert isinstance(hosts["a"]["replicas"][0]["last_probe_ms"], float)
    table = subprocess.run(
        cli("gateway", "status", "--run-dir", str(front.run_dir)), capture_output=True, text=True, timeout=60
    )
    assert front.a.replica_addr in table.stdout and "2 of 2 replica(s) in the upstream" in table.stdout
    print("\n" + table.stdout)
    # The host's own status reaches its replica on replica.host, with the secret.
    host = subprocess.run(
        cli("status", "--json", "--run-dir", str(front.b.run_dir)), capture_output=True, text=True, timeout=60
    )
    replica = json.loads(host.stdout)["replicas"][0]
    assert replica["addr"] == front.b.replica_addr and replica["in_flight"] == 0


def test_a_hosts_replica_killed_is_evicted_at_the_front_and_requests_still_pass(front: Front) -> None:
    wait_until(front.proc, front.log, front.all_ready, 2 * START_TIMEOUT_S, "both ready")
    mark = len(front.events())
    with Load(front.url) as load:
        load.wait_ok(10)
        killed_at = time.time()
        os.kill(front.a.replica_pid(), signal.SIGKILL)
        evicted = front.wait_event(
            lambda e: e["event"] == "evicted" and e["replica"] == "a/replica-0", 30, mark
        )
        load.wait_ok(10, since=evicted["ts"])  # the front keeps answering, from host b
        assert front.health()["hosts"]["a"]["ready"] == 0
        # Host a's supervisor restarts its replica; the front readmits it once its probes pass.
        admitted = front.wait_event(
            lambda e: e["event"] == "admitted" and e["replica"] == "a/replica-0", START_TIMEOUT_S, mark
        )
    front.figures["kill -9: evicted at the front after, s"] = round(evicted["ts"] - killed_at, 3)
    front.figures["kill -9: readmitted at the front after, s"] = round(admitted["ts"] - killed_at, 1)
    host_admitted = [
        e["ts"]
        for e in read_events(front.a.run_dir / "events.jsonl")
        if e["event"] == "admitted" and e["ts"] > killed_at
    ]
    front.figures["kill -9: host a readmitted its replica after, s"] = round(host_admitted[0] - killed_at, 1)
    front.figures["kill -9: requests ok"] = float(len(load.answered()))
    front.figures["kill -9: requests failed"] = float(len(load.failures))
    assert load.failures == [], load.failures[:5]
    assert front.all_ready()

"""Two hosts as Linux network namespaces, each a real `up` (one tiny-model replica on its own address and
core, the peer secret on), the gateway in the root namespace in front; load through the front while
host a is killed whole (kill -9 of every process), started again, then cut off the network and restored.

Figures (requests answered and failed, time to evict, time until no new request goes there, time to
readmit) and `gateway status` are printed (run with -s); the tests assert that no request failed (kill,
cut, rolling reload), the order of events and the counts, never a time.
"""

from __future__ import annotations

import contextlib
import functools
import json
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bench import netns
from hunyuan_serve.run.state import read_state
from tests.support.gateway import GatewayRun
from tests.support.load import Load, Sent
from tests.support.stacks import all_routed, cli, free_ports, started, tiny_engine, wait_until

START_TIMEOUT_S = 480.0  # two vLLM CPU engines loading, one per shared core
SECRET = "netns-peer-secret-0123456789abcdef"
HOST_PORT = 8080  # each host's Nginx, on its own address (namespaces do not share ports)
REPLICA_PORT = 8101
CORES = {"a": 0, "b": 1}
UNAVAILABLE = netns.unavailable()

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no network namespaces: {UNAVAILABLE}"),
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
    pytest.mark.timeout(4 * START_TIMEOUT_S),
]


def _host_config(
    work: Path, host: netns.Host, model: Path, secret: Path, replica: Mapping[str, Any] | None = None
) -> Path:
    """`up` on one host: its replica and Nginx on the host's address, fast probes, the tiny engine;
    `replica`: more replica settings (what a reload changes)."""
    settings = {
        "replicas": 1,
        "base_port": REPLICA_PORT,
        "run_dir": str(work / f"run-{host.name}"),
        "engine": tiny_engine(model),
        "replica": {"host": host.addr, "max_tokens": 8, **(replica or {})},
        "supervisor": {"probe_interval_s": 0.25, "restart_backoff_base_s": 0.5, "drain_timeout_s": 5.0},
        "nginx": {"listen": host.addr, "port": HOST_PORT, "worker_processes": 1},
        "auth": {"peer_secret_file": str(secret)},
    }
    path = work / f"up-{host.name}.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def _inventory(work: Path, lab: netns.Lab, secret: Path, port: int) -> Path:
    data = {
        "peer_secret_file": str(secret),
        # Namespaces on this machine: the plain links never leave it (the TLS hops: test_netns_tls.py).
        "hosts": [{"name": h.name, "url": h.url(HOST_PORT), "allow_plain": True} for h in lab.net.hosts],
        "gateway": {"discovery_interval_s": 0.5, "probe_interval_s": 0.25, "unhealthy_threshold": 2},
        # A request sent to a host just cut waits read_timeout_s before Nginx tries the other one.
        "nginx": {"port": port, "worker_processes": 1, "read_timeout_s": 10.0, "connect_timeout_s": 1.0},
    }
    path = work / "inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@dataclass
class Deployment:
    """The lab, each host's `up` (started and restarted here), the gateway; all stopped on exit."""

    lab: netns.Lab
    work: Path
    model: Path
    secret: Path
    stack: contextlib.ExitStack
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    gateway: GatewayRun | None = None
    figures: dict[str, Any] = field(default_factory=dict)

    def replica_addr(self, name: str) -> str:
        return f"{self.lab.host(name).addr}:{REPLICA_PORT}"

    def start_host(self, name: str) -> subprocess.Popen[bytes]:
        """`up` inside the host's namespace, pinned to its core; stopped with the deployment."""
        host = self.lab.host(name)
        config = _host_config(self.work, host, self.model, self.secret)
        argv = host.argv(["taskset", "--cpu-list", str(CORES[name]), *cli("up", "--config", str(config))])
        proc = self.stack.enter_context(started(argv, log=self.work / f"up-{name}.log"))
        self.procs[name] = proc
        return proc

    def replica_pid(self, name: str) -> int:
        state = read_state(self.work / f"run-{name}")
        assert state is not None
        return int(state["replicas"][0]["pid"])

    def reload(self, name: str, replica: Mapping[str, Any]) -> subprocess.CompletedProcess[str]:
        """Edit the host's config file, then `hunyuan-serve reload` in its namespace, as its admin would."""
        host = self.lab.host(name)
        _host_config(self.work, host, self.model, self.secret, replica)
        argv = cli("reload", "--run-dir", str(self.work / f"run-{name}"), "--timeout", str(START_TIMEOUT_S))
        return subprocess.run(host.argv(argv), capture_output=True, text=True, timeout=START_TIMEOUT_S + 60)

    def host_ready(self, name: str) -> bool:
        run_dir = self.work / f"run-{name}"
        state = read_state(run_dir)
        # The state of an `up` killed with kill -9 stays as it last wrote it: only this one's counts.
        if state is None or not state.get("running") or state.get("pid") != self.procs[name].pid:
            return False
        return all_routed(run_dir)

    def wait_host(self, name: str) -> None:
        proc = self.procs[name]
        wait_until(proc, self.work / f"up-{name}.log", lambda: self.host_ready(name), START_TIMEOUT_S, name)

    @property
    def gw(self) -> GatewayRun:
        assert self.gateway is not None, "the gateway is not started"
        return self.gateway


@pytest.fixture(scope="module")
def deployment(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    work = tmp_path_factory.mktemp("netns")
    secret = work / "peer.secret"
    secret.write_text(SECRET + "\n")
    t0 = time.time()
    with netns.hosts(["a", "b"]) as lab, contextlib.ExitStack() as stack:
        d = Deployment(lab, work, tiny_model_dir, secret, stack)
        for name in ("a", "b"):
            d.start_host(name)
        for name in ("a", "b"):
            d.wait_host(name)
        (port,) = free_ports(1)
        run_dir, log = work / "run-gateway", work / "gateway.log"
        argv = cli("gateway", "--inventory", str(_inventory(work, lab, secret, port)))
        proc = stack.enter_context(started([*argv, "--run-dir", str(run_dir)], log=log))
        d.gateway = GatewayRun(proc, run_dir, port, log)
        wait_until(proc, log, d.gw.all_ready, 60, "both hosts' replicas ready at the front")
        d.figures["cold start of 2 hosts and the gateway, s"] = round(time.time() - t0, 1)
        print("\ngateway status, both hosts up:\n" + d.gw.status())
        try:
            yield d
        finally:
            print("\nmulti-host (network namespaces) figures:", json.dumps(d.figures, indent=1))


def _went_to(d: Deployment, load: Load, addr: str) -> list[Sent]:
    """The requests the front sent to addr (first try or a retry), from its access log."""
    log = d.gw.access_by_id()
    return [s for s in load.sent if addr in str(log.get(s.request_id, {}).get("upstream_addr", ""))]


def _wait_served_by(d: Deployment, load: Load, addr: str, since: float) -> float:
    """When the first request started after `since` was answered by addr (its readmission seen)."""
    deadline = time.monotonic() + 120
    while True:
        log = d.gw.access_by_id()
        served = [
            s.start
            for s in load.sent
            if s.start > since
            and log.get(s.request_id, {}).get("upstream_addr") == addr
            and s.outcome == "200"
        ]
        if served:
            return min(served)
        assert time.monotonic() < deadline, f"{addr} readmitted but given no request"
        time.sleep(0.1)


def _is(event: str, replica: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["event"] == event and e.get("replica") == replica


def test_a_host_and_its_replica_refuse_callers_without_the_secret(deployment: Deployment) -> None:
    a = deployment.lab.host("a")
    for url in (a.url(HOST_PORT), f"http://{deployment.replica_addr('a')}"):
        for headers in ({}, {"X-Hunyuan-Peer": "not-the-secret-0123456789"}):
            body = {"text": "Hi", "source_lang": "en", "target_lang": "zh"}
            refused = httpx.post(url + "/translate", json=body, headers=headers, trust_env=False, timeout=30)
            assert refused.status_code == 403, (url, headers, refused.text)
            assert refused.json()["error"]["code"] == "peer_refused"
        allowed = httpx.get(url + "/health", headers={"X-Hunyuan-Peer": SECRET}, trust_env=False, timeout=30)
        assert allowed.status_code == 200, (url, allowed.text)


def test_host_killed_whole_loses_no_request_and_is_readmitted_when_started_again(
    deployment: Deployment,
) -> None:
    d, name = deployment, "a/replica-0"
    wait_until(d.gw.proc, d.gw.log, d.gw.all_ready, START_TIMEOUT_S, "both ready")
    mark = len(d.gw.events())
    with Load(d.gw.url) as load:
        load.wait_ok(10)
        t_kill = time.time()
        killed = d.lab.kill_all("a")
        evicted = d.gw.wait_event(_is("evicted", name), 60, mark)
        load.wait_ok(10, since=evicted["ts"])  # host b answers alone meanwhile
        print("\ngateway status, host a killed:\n" + d.gw.status())
        assert d.gw.health()["hosts"]["a"]["ready"] == 0
        t_start = time.time()
        d.start_host("a")
        d.wait_host("a")
        t_host = time.time()
        admitted = d.gw.wait_event(_is("admitted", name), START_TIMEOUT_S, mark)
        first = _wait_served_by(d, load, d.replica_addr("a"), admitted["ts"])
    # While host a was dead (from the kill until its `up` started again), which requests went there.
    sent_a = [s.start for s in _went_to(d, load, d.replica_addr("a")) if t_kill <= s.start < t_start]
    d.figures["kill -9 of host a: processes killed"] = len(killed)
    d.figures["kill -9: requests answered / failed"] = f"{len(load.answered())} / {len(load.failed())}"
    d.figures["kill -9: evicted at the front after, s"] = round(evicted["ts"] - t_kill, 3)
    d.figures["kill -9: requests sent to a while it was dead"] = len(sent_a)
    d.figures["kill -9: last new request sent to a after, s"] = round(max(sent_a, default=t_kill) - t_kill, 3)
    d.figures["restart: host a's up ready after, s"] = round(t_host - t_start, 1)
    d.figures["restart: readmitted at the front after up started, s"] = round(admitted["ts"] - t_start, 1)
    d.figures["restart: readmitted after host a was ready, s"] = round(admitted["ts"] - t_host, 3)
    d.figures["restart: first request answered by a after readmission, s"] = round(first - admitted["ts"], 3)
    assert len(killed) >= 5  # up, Nginx master and worker, the replica, its engine core (and worker)
    assert load.failed() == [], [(s.outcome, s.start - t_kill) for s in load.failed()[:5]]
    assert t_kill < evicted["ts"] < admitted["ts"]


def test_host_cut_off_is_evicted_and_readmitted_when_restored(deployment: Deployment) -> None:
    d, name = deployment, "a/replica-0"
    wait_until(d.gw.proc, d.gw.log, d.gw.all_ready, START_TIMEOUT_S, "both ready")
    mark = len(d.gw.events())
    with Load(d.gw.url) as load:
        load.wait_ok(10)
        t_cut = time.time()
        d.lab.cut("a")
        try:
            evicted = d.gw.wait_event(_is("evicted", name), 60, mark)
            load.wait_ok(10, since=evicted["ts"])
            print("\ngateway status, host a cut off:\n" + d.gw.status())
        finally:
            t_restore = time.time()
            d.lab.restore("a")
        admitted = d.gw.wait_event(_is("admitted", name), 120, mark)
        first = _wait_served_by(d, load, d.replica_addr("a"), admitted["ts"])
    sent_a = [s.start for s in _went_to(d, load, d.replica_addr("a")) if t_cut <= s.start < t_restore]
    failed = load.failed()
    d.figures["cut: requests answered / failed"] = f"{len(load.answered())} / {len(failed)}"
    d.figures["cut: failures"] = sorted({s.outcome[:80] for s in failed})
    d.figures["cut: evicted at the front after, s"] = round(evicted["ts"] - t_cut, 3)
    d.figures["cut: requests sent to a while it was cut off"] = len(sent_a)
    d.figures["cut: last new request sent to a after, s"] = round(max(sent_a, default=t_cut) - t_cut, 3)
    # What a request sent there costs: Nginx's connect timeout (or read timeout), then host b.
    d.figures["cut: slowest request started between the cut and the eviction, s"] = round(
        max((s.end - s.start for s in load.sent if t_cut - 1.0 <= s.start <= evicted["ts"]), default=0.0), 3
    )
    d.figures["restore: readmitted at the front after, s"] = round(admitted["ts"] - t_restore, 3)
    d.figures["restore: first request answered by a after readmission, s"] = round(first - admitted["ts"], 3)
    print("\ngateway status, host a restored:\n" + d.gw.status())
    # A request caught on host a by the cut waits read_timeout_s, then Nginx retries it on host b
    # (proxy_next_upstream timeout non_idempotent); one sent there before the eviction, connect_timeout_s.
    assert failed == [], [(s.outcome, round(s.start - t_cut, 3)) for s in failed[:5]]
    assert t_cut < evicted["ts"] < t_restore < admitted["ts"]
    assert d.gw.all_ready()


def test_rolling_reload_of_both_hosts_in_turn_loses_no_request(deployment: Deployment) -> None:
    d = deployment
    wait_until(d.gw.proc, d.gw.log, d.gw.all_ready, START_TIMEOUT_S, "both ready")
    pids: dict[str, str] = {}
    with Load(d.gw.url) as load:
        load.wait_ok(10)
        for name in ("a", "b"):
            before = d.replica_pid(name)
            t0 = time.time()
            out = d.reload(name, {"max_in_flight": 64})
            t1 = time.time()
            assert out.returncode == 0, out.stdout + out.stderr
            after = d.replica_pid(name)
            assert f"replica-0 pid {before} -> {after}" in out.stdout, out.stdout
            pids[name] = f"{before} -> {after}"
            d.figures[f"reload of host {name}: wall time, s"] = round(t1 - t0, 1)
            # The front routes the new replica (the other port of the pair) before the next host goes.
            wait_until(
                d.gw.proc,
                d.gw.log,
                functools.partial(_routes_only_new, d, name),
                60,
                f"{name}'s new replica",
            )
        load.wait_ok(10, since=time.time())
    print("\ngateway status, both hosts reloaded:\n" + d.gw.status())
    d.figures["reload: replica pids, old -> new"] = pids
    d.figures["reload: requests answered / failed"] = f"{len(load.answered())} / {len(load.failed())}"
    assert load.failed() == [], [s.outcome for s in load.failed()[:5]]
    for name in ("a", "b"):
        health = httpx.get(
            f"http://{d.lab.host(name).addr}:{REPLICA_PORT + 1}/health",
            headers={"X-Hunyuan-Peer": SECRET},
            trust_env=False,
            timeout=30,
        )
        assert health.json()["max_in_flight"] == 64


def _routes_only_new(d: Deployment, name: str) -> bool:
    """The gateway routes the host's replica on its new port, and no longer the old one."""
    host: dict[str, Any] = next((h for h in d.gw.state().get("hosts", []) if h["name"] == name), {})
    routed = [r["addr"] for r in host.get("replicas", []) if r["routed"]]
    return routed == [f"{d.lab.host(name).addr}:{REPLICA_PORT + 1}"] and d.gw.all_ready()

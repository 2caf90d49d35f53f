"""`hunyuan-serve up` end to end: real Nginx, two real replicas on the tiny checkpoint, real failures.

One `up` serves the module (replicas pinned to cores 0 and 1). Each test first waits until both of its
replicas are ready again, so any test runs alone or in any order; the clean-shutdown test, which ends a
stack, starts one of its own. Measured eviction and readmission times are printed (run with -s).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml

import hunyuan_serve.replica.command  # noqa: F401  # the replicas' own entry: a broken import chain fails here
from hunyuan_serve.run import stacks
from hunyuan_serve.run.events import read_events
from hunyuan_serve.run.ports import port_problem
from hunyuan_serve.run.state import read_state
from tests.support.load import Load
from tests.support.stacks import (
    alive,
    cli,
    free_ports,
    started,
    stop,
    tiny_engine,
    wait_event,
    wait_until,
)

START_TIMEOUT_S = 420.0  # two vLLM CPU engines loading on two shared cores
REPLICAS = ("replica-0", "replica-1")

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
    # Room for a readmission before the test and one start that hangs within it (see _fail_and_recover).
    pytest.mark.timeout(3 * START_TIMEOUT_S),
]


@dataclass
class Stack:
    proc: subprocess.Popen[bytes]
    run_dir: Path
    config: Path
    port: int
    log: Path
    figures: dict[str, float] = field(default_factory=dict)  # printed when the stack stops

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.run_dir / "events.jsonl")

    def state(self) -> dict[str, Any]:
        state = read_state(self.run_dir)
        assert state is not None
        return state

    def replica(self, name: str) -> dict[str, Any]:
        return next(r for r in self.state()["replicas"] if r["name"] == name)

    def all_ready(self) -> bool:
        """Every replica ready and Nginx reloaded to route to all of them."""
        state = read_state(self.run_dir)
        if state is None:
            return False
        replicas = state["replicas"]
        return all(r["state"] == "ready" for r in replicas) and state["nginx"]["ready"] == len(replicas)

    def wait_event(
        self, match: Callable[[dict[str, Any]], bool], timeout: float, after: int = 0
    ) -> dict[str, Any]:
        return wait_event(self.proc, self.log, self.events, match, timeout, after)

    def access_log(self) -> list[dict[str, Any]]:
        path = self.run_dir / "nginx" / "logs" / "access.log"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write_config(work: Path, model: Path) -> tuple[Path, int]:
    """The module's `up` settings: fast probes, the tiny engine; returns the file and the public port."""
    port, base, _ = free_ports(3)  # Nginx, then replica-0 and replica-1 on base_port + i
    config = work / "up.yaml"
    settings = {
        "replicas": len(REPLICAS),
        "base_port": base,
        "run_dir": str(work / "run"),
        "engine": tiny_engine(model),
        "replica": {"max_tokens": 8},
        "supervisor": {
            "probe_interval_s": 0.25,
            "probe_timeout_s": 2.0,
            "unhealthy_threshold": 3,
            "restart_backoff_base_s": 0.5,
            "startup_timeout_s": 400.0,
            "drain_timeout_s": 10.0,
            "kill_timeout_s": 10.0,
        },
        "nginx": {"port": port, "worker_processes": 1, "read_timeout_s": 120.0},
    }
    config.write_text(yaml.safe_dump(settings))
    return config, port


@contextlib.contextmanager
def _up(model: Path, work: Path) -> Iterator[Stack]:
    """A started `up` (not yet ready), stopped on exit with nothing of it left behind."""
    config, port = _write_config(work, model)
    log = work / "up.log"
    with started(cli("up", "--config", str(config)), log=log) as proc:
        yield Stack(proc, work / "run", config, port, log)


@pytest.fixture(scope="module")
def _module_stack(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    t0 = time.time()
    with _up(tiny_model_dir, tmp_path_factory.mktemp("up")) as stack:
        try:
            wait_until(stack.proc, stack.log, stack.all_ready, START_TIMEOUT_S, "both replicas ready")
            stack.figures["cold start of 2 replicas, s"] = round(time.time() - t0, 1)
            yield stack
        finally:
            print("\nhunyuan-serve up figures:", json.dumps(stack.figures, indent=1))


@pytest.fixture
def stack(_module_stack: Stack) -> Stack:
    """The module's `up` once both replicas are ready (an earlier test may have killed them)."""
    wait_until(_module_stack.proc, _module_stack.log, _module_stack.all_ready, 2 * START_TIMEOUT_S, "ready")
    return _module_stack


def _loading_engines(stack: Stack) -> bool:
    """Nginx up, every replica started and its engine's processes spawned (none need be ready yet)."""
    state = read_state(stack.run_dir)
    if state is None or not state["nginx"].get("pid") or not all(r["pid"] for r in state["replicas"]):
        return False
    try:
        return all(psutil.Process(r["pid"]).children() for r in state["replicas"])
    except psutil.Error:
        return False


# First in the file: it runs before the module's stack starts, so four engines never share two cores.
def test_clean_shutdown_mid_start_leaves_no_process(tiny_model_dir: Path, tmp_path: Path) -> None:
    # Stopped while its replicas load their engines, the stop most likely to leave an engine behind.
    with _up(tiny_model_dir, tmp_path) as stack:
        wait_until(stack.proc, stack.log, lambda: _loading_engines(stack), START_TIMEOUT_S, "loading")
        state = stack.state()
        nginx = psutil.Process(state["nginx"]["pid"])
        pids = {stack.proc.pid, nginx.pid, *(p.pid for p in nginx.children())}
        for replica in state["replicas"]:
            pids |= {p.pid for p in psutil.Process(replica["pid"]).children(recursive=True)}
            pids.add(replica["pid"])
        mark = len(stack.events())
        assert stop(stack.proc) == 0  # it also fails if any process of the stack is left
        assert [pid for pid in pids if alive(pid)] == []
        events = [e["event"] for e in stack.events()[mark:]]
        # Nginx first (no new request reaches a stopping replica), `stopped` last, each once.
        assert [e for e in events if e in ("stopping", "nginx_stopped", "stopped")] == [
            "stopping",
            "nginx_stopped",
            "stopped",
        ]
        assert events[-1] == "stopped"
        assert port_problem("127.0.0.1", stack.port) is None
        assert all(port_problem("127.0.0.1", r["port"]) is None for r in state["replicas"])
        assert stack.state()["running"] is False


def test_requests_flow_through_the_public_port(stack: Stack) -> None:
    with httpx.Client(base_url=stack.url, trust_env=False, timeout=60) as client:
        health = client.get("/health")
        assert health.status_code == 200 and health.json()["ready"] == 2
        response = client.post(
            "/translate",
            json={"text": "Good morning", "source_lang": "en", "target_lang": "zh"},
            headers={"X-Request-ID": "e2e-given-id"},
        )
        assert response.status_code == 200, response.text
        assert response.headers["x-request-id"] == "e2e-given-id"
        assert isinstance(response.json()["result"], str)
        # The stack's own /health names the model its replicas answer with (clients key caches by it).
        assert health.json()["model"] == response.json()["model"] != ""
        # ...and the prompt family up placed once and every replica was configured with.
        assert health.json()["family"] == "hunyuan-mt"
        made = client.post(
            "/translate", json={"text": "Good night", "source_lang": "en", "target_lang": "zh"}
        )
        assert made.status_code == 200 and len(made.headers["x-request-id"]) == 32
        assert client.get("/languages").status_code == 200
    entries = {e["request_id"]: e for e in stack.access_log()}
    given = entries["e2e-given-id"]
    assert given["status"] == 200 and given["uri"] == "/translate"
    assert given["upstream_addr"].startswith("127.0.0.1:")
    for key in ("request_time", "upstream_connect_time", "upstream_header_time", "upstream_response_time"):
        assert float(given[key]) >= 0, key
    assert made.headers["x-request-id"] in entries


def test_status_reports_both_replicas_ready(stack: Stack) -> None:
    out = subprocess.run(
        cli("status", "--json", "--run-dir", str(stack.run_dir)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    # Recorded where `status` without --run-dir looks, so that it finds this stack or names it.
    assert stack.run_dir.absolute() in [run_dir for run_dir, _ in stacks.running()]
    assert [(r["name"], r["state"], r["device"]) for r in status["replicas"]] == [
        ("replica-0", "ready", "cpu:0"),
        ("replica-1", "ready", "cpu:1"),
    ]
    assert all(alive(r["pid"]) for r in status["replicas"])
    # Each replica and every process it started run on its own core only.
    for replica, core in zip(status["replicas"], (0, 1), strict=True):
        leader = psutil.Process(replica["pid"])
        tree = [leader, *leader.children(recursive=True)]
        # The replica and its engine core (the model runs inside the core; with vLLM's spawn there was
        # a third, multiprocessing's resource tracker).
        assert "VLLM::EngineCore" in {p.name() for p in tree[1:]}
        assert {p.pid: p.cpu_affinity() for p in tree} == {p.pid: [core] for p in tree}
    assert status["nginx"]["port"] == stack.port and alive(status["nginx"]["pid"])
    table = subprocess.run(
        cli("status", "--run-dir", str(stack.run_dir)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "replica-1" in table.stdout and "ready" in table.stdout


def test_second_up_fails_at_once_naming_the_holder(stack: Stack, tmp_path: Path) -> None:
    nginx_pid = stack.state()["nginx"]["pid"]
    other = subprocess.run(
        cli("up", "--config", str(stack.config), "--run-dir", str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert other.returncode == 1
    # Master and workers all hold the socket; pids wrap, so the master need not be listed first.
    assert f"port {stack.port} on 127.0.0.1 is in use by pid " in other.stderr
    assert f"pid {nginx_pid} (nginx: master process" in other.stderr
    same_dir = subprocess.run(
        cli("up", "--config", str(stack.config)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert same_dir.returncode == 2 and f"another `up` (pid {stack.proc.pid})" in same_dir.stderr


# A replica frozen between writing a response's headers and its body: Nginx has already relayed the
# headers, so no proxy can retry that request elsewhere. Replicas write each answer in one piece
# (replica/onewrite.py), so none is tolerated; the figures count them.
TRUNCATED = "peer closed connection without sending complete message body"


def _fail_and_recover(
    stack: Stack, name: str, sig: signal.Signals, truncated_ok: int = 0
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Under load, signal one replica; checks zero failures; returns its eviction and the events since."""
    victim = stack.replica(name)
    addr = f"127.0.0.1:{victim['port']}"
    mark = len(stack.events())
    with Load(stack.url) as load:
        load.wait_ok(10)
        t_signal = time.time()
        os.kill(victim["pid"], sig)
        evicted = stack.wait_event(lambda e: e["event"] == "evicted" and e["replica"] == name, 60, mark)
        # Room for one start that hangs (seen once: a new replica stuck in the kernel's
        # sched_setaffinity), which the supervisor kills at startup_timeout_s and starts again.
        admitted = stack.wait_event(
            lambda e: e["event"] == "admitted" and e["replica"] == name, 2 * START_TIMEOUT_S, mark
        )
        served_before = len(stack.access_log())
        load.wait_ok(10, since=admitted["ts"])
        deadline = time.monotonic() + 60
        while not any(
            e["upstream_addr"] == addr and e["status"] == 200 for e in stack.access_log()[served_before:]
        ):
            assert time.monotonic() < deadline, f"{name} was readmitted but got no traffic"
            time.sleep(0.1)
    truncated = [f for f in load.failures if TRUNCATED in f]
    assert [f for f in load.failures if TRUNCATED not in f] == [], load.failures[:5]
    assert len(truncated) <= truncated_ok, truncated
    after = stack.replica(name)
    assert after["pid"] != victim["pid"] and after["state"] == "ready"
    assert after["restarts"] in (victim["restarts"] + 1, victim["restarts"] + 2)
    label = sig.name
    decided = next(
        e
        for e in stack.events()[mark:]
        if e["event"] == "transition"
        and e["replica"] == name
        and e["from"] in ("ready", "unhealthy")
        and e["to"] != "unhealthy"
    )
    stack.figures[f"{label}: supervisor decision after signal, s"] = round(decided["ts"] - t_signal, 3)
    stack.figures[f"{label}: eviction after signal, s"] = round(evicted["ts"] - t_signal, 3)
    stack.figures[f"{label}: readmission after signal, s"] = round(admitted["ts"] - t_signal, 1)
    stack.figures[f"{label}: requests served during the test"] = len(load.answered())
    stack.figures[f"{label}: responses cut after their headers"] = len(truncated)
    return evicted, stack.events()[mark:]


def test_kill_9_of_one_replica_loses_no_request(stack: Stack) -> None:
    evicted, _ = _fail_and_recover(stack, "replica-0", signal.SIGKILL)
    # Evicted on the exit event itself, not after failed probes.
    assert evicted["reason"] == "exited with code -9"


def test_sigstop_replica_is_evicted_killed_and_restarted(stack: Stack) -> None:
    evicted, since = _fail_and_recover(stack, "replica-1", signal.SIGSTOP)
    assert "3 failed probe(s)" in evicted["reason"]
    assert any(e["event"] == "replica_killed" and e["replica"] == "replica-1" for e in since)


def _logged(stack: Stack, request_id: str) -> dict[str, Any]:
    """The request's access log line (Nginx writes it after the answer has gone out)."""
    deadline = time.monotonic() + 10
    while not (found := [e for e in stack.access_log() if e["request_id"] == request_id]):
        assert time.monotonic() < deadline, f"no access log line for {request_id}"
        time.sleep(0.05)
    [entry] = found
    return entry


def test_all_replicas_down_nginx_answers_503_with_retry_after_itself_trying_no_replica(stack: Stack) -> None:
    mark = len(stack.events())
    addrs = [stack.replica(name)["addr"] for name in REPLICAS]
    for name in REPLICAS:
        os.kill(stack.replica(name)["pid"], signal.SIGKILL)
    stack.wait_event(lambda e: e["event"] == "nginx_reloaded" and e["ready"] == 0, 30, mark)
    with httpx.Client(base_url=stack.url, trust_env=False, timeout=30) as client:
        start = time.perf_counter()
        body = {"text": "Hello", "source_lang": "en", "target_lang": "zh"}
        response = client.post("/translate", json=body, headers={"X-Request-ID": "e2e-all-down"})
        stack.figures["all down: 503 answered in, ms"] = round((time.perf_counter() - start) * 1000, 1)
        health = client.get("/health")
    assert response.status_code == 503 and int(response.headers["retry-after"]) >= 1
    assert response.json()["error"]["code"] == "unavailable"
    # Answered at once, by Nginx: every replica is marked down, so it tried (and waited for) none.
    entry = _logged(stack, "e2e-all-down")
    assert not any(addr in entry["upstream_addr"] for addr in addrs), entry
    assert health.status_code == 503 and health.json()["ready"] == 0 and "retry-after" in health.headers

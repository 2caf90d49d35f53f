"""`up` SIGKILL-ed: its replica stops by itself (it watches `up`), the next `up` stops the left Nginx.

Real `up`, Nginx and replica processes (the engine stand-in, so no engine loads). Only `up`'s own pid
is killed; its replica and Nginx run in sessions of their own. Heavy:
`flock /tmp/hs-heavy.lock timeout 600 .venv/bin/pytest -s -q tests/supervise/test_orphans_e2e.py`.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from hunyuan_serve.run.events import read_events
from hunyuan_serve.run.state import read_state
from tests.support.stacks import alive, cli, free_ports, http_ok, spawn, started, stop, tail, wait_until

READY_TIMEOUT_S = 300.0  # `up`, Nginx and a stand-in replica on a loaded two-core machine
# The replica sees `up` gone within parent_check_s, then drains (nothing in flight) and exits; the
# bound is a deadline for "by itself", far above that, not a speed figure (printed below).
GONE_TIMEOUT_S = 60.0

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.nginx,
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
    pytest.mark.timeout(2 * READY_TIMEOUT_S + GONE_TIMEOUT_S + 120),
]


def _config(tmp_path: Path, model: Path) -> tuple[Path, Path, int]:
    port, base = free_ports(2)
    run_dir = tmp_path / "run"
    config = tmp_path / "up.yaml"
    settings = {
        "replicas": 1,
        "base_port": base,
        "run_dir": str(run_dir),
        "engine": {"model": str(model), "stand_in": True},
        "replica": {"max_tokens": 8, "parent_check_s": 0.5},
        "supervisor": {"probe_interval_s": 0.25, "drain_timeout_s": 5.0, "kill_timeout_s": 5.0},
        "nginx": {"port": port, "worker_processes": 1},
    }
    config.write_text(yaml.safe_dump(settings))
    return config, run_dir, port


def _ready(run_dir: Path, up: subprocess.Popen[bytes]) -> bool:
    """That `up`'s replica ready and routed (the state file of a killed `up` stays, naming its pid)."""
    state = read_state(run_dir)
    if not state or state["pid"] != up.pid:
        return False
    return [r["state"] for r in state["replicas"]] == ["ready"] and bool(state["nginx"]["ready"])


def _processes(state: dict[str, Any]) -> tuple[list[psutil.Process], list[psutil.Process]]:
    """The replica with its descendants, and the Nginx master with its workers, noted while alive."""
    found = []
    for pid in (state["replicas"][0]["pid"], state["nginx"]["pid"]):
        leader = psutil.Process(pid)
        found.append([leader, *leader.children(recursive=True)])
    return found[0], found[1]


def _gone(processes: list[psutil.Process], timeout_s: float) -> float | None:
    """Seconds until none of processes is alive (psutil knows a reused pid), or None past timeout_s."""
    start = time.monotonic()
    while any(alive(p.pid) and p.is_running() for p in processes):
        if time.monotonic() - start > timeout_s:
            return None
        time.sleep(0.05)
    return time.monotonic() - start


def _kill_left(processes: list[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()


def test_a_killed_up_leaves_nothing_the_next_up_trips_on(tiny_model_dir: Path, tmp_path: Path) -> None:
    config, run_dir, port = _config(tmp_path, tiny_model_dir)
    argv, log = cli("up", "--config", str(config)), tmp_path / "up.log"
    first = spawn(argv, log)
    replica: list[psutil.Process] = []
    nginx: list[psutil.Process] = []
    try:
        wait_until(first, log, lambda: _ready(run_dir, first), READY_TIMEOUT_S, "the first `up` ready")
        state = read_state(run_dir)
        assert state is not None
        replica, nginx = _processes(state)
        first.send_signal(signal.SIGKILL)  # `up` alone: not its group, not its children
        first.wait(30)
        assert all(alive(p.pid) for p in nginx), "Nginx cannot watch `up`: it runs until the next `up`"
        replica_gone_s = _gone(replica, GONE_TIMEOUT_S)
        left = [f"{p.pid} {p.name()}" for p in replica if alive(p.pid)]
        replica_log_path = run_dir / "logs" / "replica-0.log"
        assert replica_gone_s is not None, f"the replica outlived its `up`: {left}\n{tail(replica_log_path)}"
        print(f"\nreplica gone {replica_gone_s:.2f}s after `up` was SIGKILL-ed (parent_check_s 0.5)")
        assert '"event": "parent_gone"' in replica_log_path.read_text(errors="replace")
        # The next `up` on the same run dir and ports: it stops the old Nginx, then starts as usual.
        health = http_ok(f"http://127.0.0.1:{port}/health")
        with started(argv, log=log, ready=health, timeout_s=READY_TIMEOUT_S) as up:
            wait_until(up, log, lambda: _ready(run_dir, up), READY_TIMEOUT_S, "the second `up` ready")
            assert _gone(nginx, 0) is not None, "the old Nginx still runs beside the new one"
            events = read_events(run_dir / "events.jsonl")
            stopped = [e for e in events if e["event"] == "leftover_nginx_stopped"]
            assert [e["pid"] for e in stopped] == [nginx[0].pid]
            assert not [e for e in events if e["event"] == "leftover_replicas_waited"]  # already gone
            assert stop(up) == 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(30)
        _kill_left([*replica, *nginx])

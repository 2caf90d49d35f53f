"""A replica that can never start (no such model) crash-loops into `failed`; `up` and Nginx stay up."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from hunyuan_serve.supervise.events import read_events
from hunyuan_serve.supervise.ports import port_problem
from hunyuan_serve.supervise.procs import pid_alive

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
]
pytest.importorskip("hunyuan_serve.replica.command", reason="the replica command is not there yet")


def test_crash_loop_ends_in_failed_and_status_reports_it(tmp_path: Path) -> None:
    port = next(
        p for p in range(24100, 40000, 89) if all(port_problem("127.0.0.1", p + i) is None for i in (0, 1))
    )
    run_dir = tmp_path / "run"
    config = tmp_path / "up.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "replicas": 1,
                "base_port": port + 1,
                "run_dir": str(run_dir),
                "engine": {"model": str(tmp_path / "no-such-model")},
                "supervisor": {"crash_loop_budget": 2, "restart_backoff_base_s": 0.1, "kill_timeout_s": 5.0},
                "nginx": {"port": port, "worker_processes": 1, "retry_after_s": 5},
            }
        )
    )
    up = subprocess.Popen(
        [sys.executable, "-m", "hunyuan_serve", "up", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not any(e.get("to") == "failed" for e in read_events(run_dir / "events.jsonl")):
            assert up.poll() is None, "up exited"
            assert time.monotonic() < deadline, read_events(run_dir / "events.jsonl")[-5:]
            time.sleep(0.2)
        events = read_events(run_dir / "events.jsonl")
        exits = [e for e in events if e["event"] == "replica_exited"]
        assert len(exits) == 2 and all(e["returncode"] != 0 for e in exits)
        failed = next(e for e in events if e.get("to") == "failed")
        assert "crash loop: 2 failures" in failed["reason"]
        time.sleep(1.0)  # the state file is written once per loop turn

        out = subprocess.run(
            [sys.executable, "-m", "hunyuan_serve", "status", "--json", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        status = json.loads(out.stdout)
        assert status["running"] is True
        assert [(r["state"], r["restarts"], r["pid"]) for r in status["replicas"]] == [("failed", 1, None)]
        assert pid_alive(status["nginx"]["pid"])
        health = httpx.get(f"http://127.0.0.1:{port}/health", trust_env=False, timeout=10)
        assert health.status_code == 503 and health.headers["retry-after"] == "5"
    finally:
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=60) == 0

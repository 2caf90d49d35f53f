"""A replica that can never start crash-loops into `failed`; `up` and Nginx stay up and say so.

The model is the tiny checkpoint, which `up`'s preflight accepts; the replicas' cache file cannot be
created (its directory is a regular file), so each replica exits before its engine loads: real `up`,
Nginx and replica processes, no engine.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

import hunyuan_serve.replica.command  # noqa: F401  # the replicas' own entry: a broken import chain fails here
from hunyuan_serve.run.events import read_events
from hunyuan_serve.run.state import read_state
from tests.support.stacks import alive, cli, free_ports, started, stop, wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.nginx,
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
]


def _replica_failed(run_dir: Path) -> bool:
    """The failed transition logged and written to the state file (which status reads)."""
    state = read_state(run_dir)
    if state is None or [r["state"] for r in state["replicas"]] != ["failed"]:
        return False
    return any(e.get("to") == "failed" for e in read_events(run_dir / "events.jsonl"))


def test_crash_loop_ends_in_failed_and_status_reports_it(tiny_model_dir: Path, tmp_path: Path) -> None:
    not_a_dir = tmp_path / "not-a-directory"
    not_a_dir.write_text("")
    port, base = free_ports(2)
    run_dir = tmp_path / "run"
    config = tmp_path / "up.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "replicas": 1,
                "base_port": base,
                "run_dir": str(run_dir),
                "engine": {"model": str(tiny_model_dir)},
                "replica": {"cache_path": str(not_a_dir / "cache.sqlite")},
                "supervisor": {"crash_loop_budget": 2, "restart_backoff_base_s": 0.1, "kill_timeout_s": 5.0},
                "nginx": {"port": port, "worker_processes": 1, "retry_after_s": 5},
            }
        )
    )
    log = tmp_path / "up.log"
    with started(cli("up", "--config", str(config)), log=log) as up:
        wait_until(up, log, lambda: _replica_failed(run_dir), 300, "the replica failed")
        events = read_events(run_dir / "events.jsonl")
        exits = [e for e in events if e["event"] == "replica_exited"]
        assert len(exits) == 2 and all(e["returncode"] != 0 for e in exits)
        failed = next(e for e in events if e.get("to") == "failed")
        assert "crash loop: 2 failures" in failed["reason"]

        out = subprocess.run(
            cli("status", "--json", "--config", str(config)), capture_output=True, text=True, timeout=60
        )
        status = json.loads(out.stdout)
        assert status["running"] is True
        assert [(r["state"], r["restarts"], r["pid"]) for r in status["replicas"]] == [("failed", 1, None)]
        assert alive(status["nginx"]["pid"])
        health = httpx.get(f"http://127.0.0.1:{port}/health", trust_env=False, timeout=10)
        assert health.status_code == 503 and health.headers["retry-after"] == "5"
        assert stop(up) == 0

"""`restart_stack`: one `up` of two tiny replicas (real Nginx, fast probes) for the modules that kill,
stop and reload its replicas (tests/supervise/test_up_e2e.py, test_reload_e2e.py).

Started by its first user and stopped after its last (tests/conftest.py), so the suite starts it once
instead of once per module. A user leaves it with both replicas ready again, and `settings` and
`family` saying what it runs (a reload changes them).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hunyuan_serve.run.events import read_events
from hunyuan_serve.run.state import read_state
from tests.support.stacks import all_routed, cli, free_ports, spawn, stop, tiny_engine, wait_event, wait_until

START_TIMEOUT_S = 420.0  # two vLLM CPU engines loading on two shared cores
REPLICAS = ("replica-0", "replica-1")
# Long enough for both replicas, killed at once, to load their engines again side by side.
HOLD_S = 300.0


def settings(work: Path, model: Path) -> dict[str, Any]:
    """Two replicas, fast probes, the tiny engine; five ports: Nginx, then both port sets of the pair
    (base_port + 0..3: a reload starts each new replica on the other port of its pair)."""
    port, base, *_ = free_ports(5)
    return {
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
        "nginx": {"port": port, "worker_processes": 1, "read_timeout_s": 120.0, "hold_s": HOLD_S},
    }


@dataclass
class UpStack:
    """A running `up` started from its config file; `settings` is what the file holds now."""

    proc: subprocess.Popen[bytes]
    run_dir: Path
    config: Path
    settings: dict[str, Any]
    log: Path
    family: str = "hunyuan-mt"  # the prompt family of the model it serves (tiny_model_dir's)
    figures: dict[str, Any] = field(default_factory=dict)  # printed when the stack stops

    @property
    def port(self) -> int:
        return int(self.settings["nginx"]["port"])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.run_dir / "events.jsonl")

    def state(self) -> dict[str, Any]:
        state = read_state(self.run_dir)
        assert state is not None
        return state

    def replicas(self) -> list[dict[str, Any]]:
        return list(self.state()["replicas"])

    def replica(self, name: str) -> dict[str, Any]:
        return next(r for r in self.replicas() if r["name"] == name)

    def pids(self) -> dict[str, int]:
        return {r["name"]: r["pid"] for r in self.replicas()}

    def all_ready(self) -> bool:
        """Every replica ready and Nginx reloaded to route to all of them."""
        return all_routed(self.run_dir)

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        wait_until(self.proc, self.log, self.all_ready, timeout_s, "both replicas ready")

    def wait_event(
        self, match: Callable[[dict[str, Any]], bool], timeout: float, after: int = 0
    ) -> dict[str, Any]:
        return wait_event(self.proc, self.log, self.events, match, timeout, after)

    def access_log(self) -> list[dict[str, Any]]:
        path = self.run_dir / "nginx" / "logs" / "access.log"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def write(self, settings: dict[str, Any]) -> None:
        """What the user does before `reload`: edit the file `up` was started with."""
        self.config.write_text(yaml.safe_dump(settings))

    def stop(self) -> None:
        try:
            stop(self.proc)
        finally:
            print("\nrestart stack figures:", json.dumps(self.figures, indent=1))


def start(model: Path, work: Path) -> UpStack:
    """`up` on the module settings, started (not waited for)."""
    chosen = settings(work, model)
    config, log = work / "up.yaml", work / "up.log"
    config.write_text(yaml.safe_dump(chosen))
    return UpStack(spawn(cli("up", "--config", str(config)), log), work / "run", config, chosen, log)

"""A running `hunyuan-serve gateway` as the e2e tests see it: its events, access log, /health, status."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from hunyuan_serve.gateway.loop import EVENTS_FILE, STATE_FILE
from hunyuan_serve.run.events import read_events
from tests.support.stacks import cli, wait_event


@dataclass
class GatewayRun:
    proc: subprocess.Popen[bytes]
    run_dir: Path
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.run_dir / EVENTS_FILE)

    def access_log(self) -> list[dict[str, Any]]:
        path = self.run_dir / "nginx" / "logs" / "access.log"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def access_by_id(self) -> dict[str, dict[str, Any]]:
        return {e["request_id"]: e for e in self.access_log()}

    def health(self) -> dict[str, Any]:
        try:
            return dict(httpx.get(self.url + "/health", timeout=5, trust_env=False).json())
        except (httpx.HTTPError, ValueError):
            return {}

    def state(self) -> dict[str, Any]:
        """What `gateway status --json` prints, read here: polling the CLI costs an interpreter a call."""
        try:
            return dict(json.loads((self.run_dir / STATE_FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return {}

    def routed_ready(self) -> int:
        """How many replicas the gateway's Nginx routes to, as the gateway wrote it once a reload was
        done: while one is under way, old workers still answer beside the new ones."""
        return int(self.state().get("nginx", {}).get("ready", -1))

    def all_ready(self, count: int = 2) -> bool:
        # /health alone is not enough: a new worker's answer can come before the reload is done, and
        # the next request then reaches an old worker that still answers with the config before.
        return self.routed_ready() == count and self.health().get("ready") == count

    def status(self, *flags: str) -> str:
        argv = cli("gateway", "status", *flags, "--run-dir", str(self.run_dir))
        return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout

    def wait_event(
        self, match: Callable[[dict[str, Any]], bool], timeout: float, after: int
    ) -> dict[str, Any]:
        return wait_event(self.proc, self.log, self.events, match, timeout, after)

"""`up` with two replicas of a tiny checkpoint, every answer max_tokens long: the burst and chaos stack."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from hunyuan_serve.run.state import read_state
from tests.support.stacks import cli, free_ports, started, tiny_engine, wait_until

START_TIMEOUT_S = 420.0  # two vLLM CPU engines loading on two shared cores
RELOAD_TIMEOUT_S = 600.0  # a rolling reload starts each replica anew beside the old one, one at a time


@dataclass
class TwoReplicas:
    """A running `up` of two replicas: where it answers, its run dir and log, the settings it read."""

    proc: subprocess.Popen[bytes]
    work: Path
    settings: dict[str, Any]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.settings['nginx']['port']}"

    @property
    def run_dir(self) -> Path:
        return self.work / "run"

    @property
    def log(self) -> Path:
        return self.work / "up.log"

    @property
    def config(self) -> Path:
        return self.work / "up.yaml"

    def replicas(self) -> list[dict[str, Any]]:
        state = read_state(self.run_dir)
        assert state is not None
        return list(state["replicas"])

    def ready(self) -> bool:
        """Both replicas ready and both in Nginx's routing."""
        state = read_state(self.run_dir)
        if state is None:
            return False
        return all(r["state"] == "ready" for r in state["replicas"]) and state["nginx"]["ready"] == 2

    def wait_ready(self, what: str = "both ready") -> None:
        wait_until(self.proc, self.log, self.ready, START_TIMEOUT_S, what)

    def write(self, settings: dict[str, Any]) -> None:
        """What a user does before `reload`: edit the file `up` was started with."""
        self.config.write_text(yaml.safe_dump(settings))

    def reload(self) -> subprocess.CompletedProcess[str]:
        """`hunyuan-serve reload`, waited for until the reload's outcome."""
        argv = cli("reload", "--run-dir", str(self.run_dir), "--timeout", str(RELOAD_TIMEOUT_S))
        return subprocess.run(argv, capture_output=True, text=True, timeout=RELOAD_TIMEOUT_S + 60)

    def served_model(self) -> str:
        answer = httpx.get(f"{self.url}/v1/models", trust_env=False, timeout=10).json()
        return str(answer["data"][0]["id"])


def two_replica_settings(
    work: Path, model: Path, max_num_seqs: int, replica: dict[str, Any], nginx: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The config of two replicas on free ports, answers of 8 tokens, fast probes and restarts."""
    port, base, _ = free_ports(3)
    return {
        "replicas": 2,
        "base_port": base,
        "run_dir": str(work / "run"),
        "engine": tiny_engine(model, max_num_seqs),
        "replica": {"max_tokens": 8, "cache_entries": 0, **replica},
        "supervisor": {"probe_interval_s": 0.25, "startup_timeout_s": 400.0, "restart_backoff_base_s": 0.5},
        "nginx": {"port": port, "worker_processes": 1, "read_timeout_s": 120.0, **(nginx or {})},
    }


@contextlib.contextmanager
def two_replicas(work: Path, settings: dict[str, Any]) -> Iterator[TwoReplicas]:
    """`up` on these settings (two_replica_settings), yielded once both replicas are ready."""
    env = {**os.environ, "HUNYUAN_SERVE_TEST_IGNORE_EOS": "1"}  # every text costs max_tokens
    stack_settings = copy.deepcopy(settings)
    (work / "up.yaml").write_text(yaml.safe_dump(stack_settings))
    with started(cli("up", "--config", str(work / "up.yaml")), log=work / "up.log", env=env) as proc:
        stack = TwoReplicas(proc, work, stack_settings)
        stack.wait_ready()
        yield stack


async def health_of(http: httpx.AsyncClient, port: int) -> dict[str, Any]:
    """A replica's /health asked directly: its body, and its HTTP status as `http` (the error's name
    when it did not answer)."""
    try:
        answer = await http.get(f"http://127.0.0.1:{port}/health", timeout=5)
        return {**answer.json(), "http": answer.status_code}
    except (httpx.HTTPError, ValueError) as err:
        return {"http": type(err).__name__}


async def until(done: asyncio.Future[Any], check: Any, timeout_s: float, poll_s: float = 0.05) -> bool:
    """Poll the coroutine function `check` until it returns True, `done` is done or timeout_s passes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not done.done() and loop.time() < deadline:
        if await check():
            return True
        await asyncio.sleep(poll_s)  # the burst's own pace: nothing to await but its progress
    return False

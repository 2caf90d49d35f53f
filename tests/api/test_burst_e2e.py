"""A burst as a user's script sends it (one client, every string at once, no retries) against `up` with
two replicas: past the engines' batch it waits and is answered; past what the replicas queue the edge
answers a fast 503 with Retry-After, in each API's shape; and a kill -9 of one replica during a burst
in flight refuses none of it (Nginx retries what it held on the other)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from hunyuan_serve.run.state import read_state
from tests.api.test_edge import PATHS, message_of
from tests.support.stacks import cli, free_ports, started, tiny_engine, wait_until

START_TIMEOUT_S = 420.0  # two vLLM CPU engines loading on two shared cores
# Each replica batches 4 and lets 40 wait: Nginx sends each at most 44 (edge/capacity.py).
MAX_NUM_SEQS = 4
MAX_QUEUED = 40
WITHIN = 80  # well past the 8 the engines batch, within the 88 the replicas take
PAST = 400  # far past them: most are refused before any place frees up
ONE_REPLICA = 40  # what the survivor takes alone when the other is killed

pytestmark = [
    pytest.mark.engine,
    pytest.mark.e2e,
    pytest.mark.nginx,
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
    pytest.mark.timeout(3 * START_TIMEOUT_S),
]


def _config(work: Path, model: Path) -> tuple[Path, int]:
    port, base, _ = free_ports(3)
    settings = {
        "replicas": 2,
        "base_port": base,
        "run_dir": str(work / "run"),
        "engine": tiny_engine(model, MAX_NUM_SEQS),
        "replica": {
            "max_tokens": 8,
            "cache_entries": 0,
            "max_in_flight": MAX_NUM_SEQS,
            "max_queued": MAX_QUEUED,
        },
        "supervisor": {"probe_interval_s": 0.25, "startup_timeout_s": 400.0},
        "nginx": {"port": port, "worker_processes": 1, "read_timeout_s": 120.0},
    }
    config = work / "up.yaml"
    config.write_text(yaml.safe_dump(settings))
    return config, port


def _ready(run_dir: Path) -> bool:
    state = read_state(run_dir)
    if state is None:
        return False
    return all(r["state"] == "ready" for r in state["replicas"]) and state["nginx"]["ready"] == 2


def _body(dialect: str, text: str, model: str) -> dict[str, Any]:
    return {
        "native": {"text": text, "source_lang": "en", "target_lang": "zh"},
        "openai": {
            "model": model,
            "messages": [{"role": "user", "content": f"Translate into Chinese: {text}"}],
        },
        "libretranslate": {"q": text, "source": "en", "target": "zh"},
        "deepl": {"text": [text], "source_lang": "EN", "target_lang": "ZH"},
        "immersive": {"source_lang": "en", "target_lang": "zh-CN", "text_list": [text]},
    }[dialect]


async def _burst(url: str, sends: list[tuple[str, str]], model: str) -> list[tuple[str, httpx.Response]]:
    """The seed's script: one client, every request at once, no retries."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=300, limits=limits) as http:
        answers = await asyncio.gather(
            *(http.post(PATHS[dialect], json=_body(dialect, text, model)) for dialect, text in sends)
        )
    return [(dialect, answer) for (dialect, _), answer in zip(sends, answers, strict=True)]


@dataclass
class Stack:
    url: str
    run_dir: Path
    log: Path
    proc: subprocess.Popen[bytes]
    model: str


@pytest.fixture(scope="module")
def stack(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("burst")
    config, port = _config(work, tiny_model_dir)
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HUNYUAN_SERVE_TEST_IGNORE_EOS": "1"}  # every text costs max_tokens
    with started(cli("up", "--config", str(config)), log=work / "up.log", env=env) as up:
        wait_until(up, work / "up.log", lambda: _ready(work / "run"), START_TIMEOUT_S, "both ready")
        model = httpx.get(f"{url}/v1/models", trust_env=False).json()["data"][0]["id"]
        yield Stack(url, work / "run", work / "up.log", up, model)


def test_a_burst_within_the_queues_is_answered_and_past_them_refused_fast(stack: Stack) -> None:
    sends = [("native", f"String {i} of the page") for i in range(WITHIN)]
    within = asyncio.run(_burst(stack.url, sends, stack.model))
    dialects = list(PATHS)
    sends = [(dialects[i % len(dialects)], f"Label {i} of the form") for i in range(PAST)]
    past = asyncio.run(_burst(stack.url, sends, stack.model))
    assert Counter(r.status_code for _, r in within) == {200: WITHIN}, [r.text for _, r in within][:3]
    statuses = Counter(r.status_code for _, r in past)
    assert set(statuses) == {200, 503} and statuses[200] >= 2 * (MAX_NUM_SEQS + MAX_QUEUED), statuses
    for dialect, response in past:
        if response.status_code == 503:
            assert int(response.headers["retry-after"]) >= 1, response.headers
            body = response.json()
            code = "overloaded" if "overloaded" in response.text else "unavailable"
            assert message_of(dialect, body, code), (dialect, body)
    print(f"\n{WITHIN} at once: all 200; {PAST} at once: {dict(statuses)}")


def _in_flight(port: int) -> float:
    try:
        return float(
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2, trust_env=False).json()["in_flight"]
        )
    except (httpx.HTTPError, KeyError, ValueError):
        return 0.0


def test_a_kill_9_of_one_replica_during_a_burst_refuses_none_of_it(stack: Stack) -> None:
    wait_until(stack.proc, stack.log, lambda: _ready(stack.run_dir), START_TIMEOUT_S, "both ready")
    state = read_state(stack.run_dir)
    assert state is not None
    victim = state["replicas"][0]
    sends = [("native", f"Line {i} of the kill") for i in range(ONE_REPLICA)]

    async def burst_and_kill() -> list[tuple[str, httpx.Response]]:
        burst = asyncio.ensure_future(_burst(stack.url, sends, stack.model))
        for _ in range(1000):  # bounded: 10 s, until the victim holds part of the burst
            if _in_flight(victim["port"]) >= MAX_NUM_SEQS or burst.done():
                break
            await asyncio.sleep(0.01)
        os.kill(victim["pid"], signal.SIGKILL)
        return await burst

    killed_at = time.monotonic()
    answers = asyncio.run(burst_and_kill())
    wait_until(stack.proc, stack.log, lambda: _ready(stack.run_dir), START_TIMEOUT_S, "the victim back")
    back_s = time.monotonic() - killed_at
    assert Counter(r.status_code for _, r in answers) == {200: ONE_REPLICA}, [r.text for _, r in answers][:3]
    after = read_state(stack.run_dir)
    assert after is not None and after["replicas"][0]["pid"] != victim["pid"]
    print(f"\nkill -9 during {ONE_REPLICA} at once: all 200; the replica ready again {back_s:.1f} s later")

"""A real replica (vLLM, tiny checkpoint) busy with a long prefill: its health and a retry's deadline.

The engine takes 2 prompt tokens a step (max_num_batched_tokens), so a prompt of some 1,750 tokens,
sent whole (segment_tokens 0), is a prefill of some 870 steps: 2.4 s on an idle 2-core machine, more
under load, as a long text is on a real model. Both tests need the prefill to outlast a few requests;
where the machine ran one faster than that, they start another (bounded).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.stacks import cli, free_port, http_ok, started, wait_until

pytestmark = pytest.mark.engine

# Far above a short answer's time on a loaded machine (up to 3.3 s measured beside four engines), and
# above the long prefill's, whose stream the deadline would otherwise cut.
REQUEST_TIMEOUT_S = 30
# A retry gets what the deadline leaves less this: half a second, far less than the prefill it waits on.
QA_RETRY_RESERVE_S = REQUEST_TIMEOUT_S - 0.5
# Some 1,750 prompt tokens, within the tiny model's 2,048 positions; each prefill's own first word, so
# that none reuses another's cached prefix (vLLM's prefix caching would skip most of the prefill). Cut
# into segments, the repeated ones would be answered from the cache or coalesced, not prefilled.
LONG_TEXT = "{} " + "hello world " * 190
# Prefills a test may start before it gives up on the machine outrunning its probes.
ATTEMPTS = 3


@dataclass
class Replica:
    url: str
    log: Path
    proc: Any

    def lines(self) -> list[dict[str, Any]]:
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return [json.loads(line) for line in text.splitlines() if line.startswith('{"request_id"')]

    def running(self) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        match = re.search(r"^hunyuan_engine_running ([0-9.e+-]+)$", text, re.MULTILINE)
        return float(match.group(1)) if match else 0.0


@pytest.fixture(scope="module")
def replica(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replica]:
    work = tmp_path_factory.mktemp("busy")
    port = free_port()
    argv = cli(
        "replica", "--model", str(tiny_model_dir), "--port", str(port),
        "--max-model-len", "2048", "--kv-cache-memory-bytes", str(128 * 2**20), "--enforce-eager", "true",
        "--max-num-seqs", "2", "--max-num-batched-tokens", "2", "--cache-path", str(work / "cache.sqlite"),
        "--segment-tokens", "0",
        # A deep probe that waited behind the prefill would call the engine hung within a second.
        "--health-deep-timeout-s", "1", "--stall-timeout-s", "30",
        "--request-timeout-s", str(REQUEST_TIMEOUT_S), "--qa-retry-reserve-s", str(QA_RETRY_RESERVE_S),
    )  # fmt: skip
    # Test-only: random weights emit EOS at once; ignoring it makes every answer stop at max_tokens,
    # which the answer checks flag (truncated).
    env = {**os.environ, "HUNYUAN_SERVE_TEST_IGNORE_EOS": "1"}
    url = f"http://127.0.0.1:{port}"
    log = work / "replica.log"
    with started(argv, log=log, ready=http_ok(f"{url}/health"), timeout_s=400, env=env) as proc:
        yield Replica(url, log, proc)


@dataclass
class Prefill:
    """A stream of LONG_TEXT in a thread: done once its answer is in."""

    done: threading.Event = field(default_factory=threading.Event)
    status: list[int] = field(default_factory=list)


@contextlib.contextmanager
def long_prefill(replica: Replica, first_word: str) -> Iterator[Prefill]:
    prefill = Prefill()
    body = {
        "text": LONG_TEXT.format(first_word),
        "source_lang": "en",
        "target_lang": "zh",
        "max_tokens": 4,
        "stream": True,
    }

    def run() -> None:
        try:
            with httpx.stream("POST", f"{replica.url}/translate", json=body, timeout=300) as response:
                response.read()
                prefill.status.append(response.status_code)
        finally:
            prefill.done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield prefill
    finally:
        thread.join(300)
    assert prefill.status == [200]


def test_health_deep_or_not_is_200_throughout_a_long_prefill(replica: Replica) -> None:
    seen: list[tuple[str, int, dict[str, Any]]] = []
    for attempt in range(ATTEMPTS):
        with long_prefill(replica, f"probes{attempt}") as prefill:
            while not prefill.done.is_set():
                for params in ({"deep": "1"}, {}):
                    response = httpx.get(f"{replica.url}/health", params=params, timeout=30)
                    seen.append((str(params), response.status_code, response.json()))
        during = [each for each in seen if each[2].get("in_flight")]  # answered while the stream ran
        if len({kind for kind, _, _ in during}) == 2:
            break
    assert len({kind for kind, _, _ in during}) == 2, seen
    assert [(kind, status) for kind, status, _ in seen if status != 200] == [], seen


@dataclass
class Cut:
    """One try of a retry behind the prefill: the first answer, the retried one (its X-Request-ID),
    whether it waited."""

    first: httpx.Response
    second: httpx.Response
    request_id: str
    behind: bool


def retry_behind_a_prefill(replica: Replica, attempt: int) -> Cut:
    # Drawn from the whole vocabulary: the family's own sampling (top_k 20) of random weights can draw
    # only tokens that decode to nothing, an answer flagged `empty` and never cached (30 of 30 drawn
    # so came back text and `truncated`: with the EOS ignored each stops at max_tokens). Each try its
    # own text: a retry that did not wait may have replaced the first answer in the cache.
    body = {
        "text": f"Open the settings page {attempt}.",
        "source_lang": "en",
        "target_lang": "zh",
        "max_tokens": 8,
        "temperature": 2.0,
        "top_p": 1.0,
        "top_k": -1,
    }
    first = httpx.post(f"{replica.url}/translate", json={**body, "qa": "flag"}, timeout=60)
    assert first.status_code == 200, first.text
    assert first.json()["result"].strip() and "truncated" in [flag["check"] for flag in first.json()["qa"]]
    request_id = f"cut-{attempt}"
    with long_prefill(replica, f"retry{attempt}") as prefill:
        # The prefill holds each step's token budget: the retry's prompt waits behind it.
        started = lambda: replica.running() >= 1 or prefill.done.is_set()  # noqa: E731
        wait_until(replica.proc, replica.log, started, 60, "the prefill running")
        second = httpx.post(
            f"{replica.url}/translate",
            json={**body, "qa": "retry"},
            headers={"X-Request-ID": request_id},
            timeout=60,
        )
        behind = not prefill.done.is_set()
    return Cut(first, second, request_id, behind)


def test_a_retry_the_deadline_cuts_short_gives_the_first_answer_flagged(replica: Replica) -> None:
    for attempt in range(ATTEMPTS):
        cut = retry_behind_a_prefill(replica, attempt)
        if cut.behind:
            break
    assert cut.behind, "each prefill ended before its retry: the retry did not have to wait"
    assert cut.second.status_code == 200, cut.second.text
    answer = cut.second.json()
    assert answer["result"] == cut.first.json()["result"] and answer["cached"] is True
    assert "truncated" in [flag["check"] for flag in answer["qa"]]
    assert cut.second.headers["X-Hunyuan-QA"].startswith("flagged 1/1")
    logged = lambda: any(x["request_id"] == cut.request_id for x in replica.lines())  # noqa: E731
    wait_until(replica.proc, replica.log, logged, 10, "log")
    [line] = [x for x in replica.lines() if x["request_id"] == cut.request_id]
    assert line["status"] == 200 and line["qa_retry_unfinished"] == 1

"""A scripted in-process engine and a Uvicorn-in-a-thread server, for tests of the app's pure logic."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from hunyuan_serve.config import ReplicaConfig, ServeConfig
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.replica.admission.gated_engine import GatedEngine, bulk_gate
from hunyuan_serve.replica.engine.interface import Delta, Engine, EngineStats, Generation, Sampling
from tests.support.stacks import free_port


class FakeEngine:
    """Answers '<n chars>' after `delay` seconds; counts calls, running requests and aborts.

    A test can hold it: start() and generate() then wait, in the server's loop, until let go, so
    tests order events (in flight, refused, released) instead of racing a sleep.
    """

    def __init__(
        self, delay: float = 0.0, max_model_len: int = 1000, start_error: Exception | None = None
    ) -> None:
        self.model = "/models/fake"
        self.model_name = "fake"
        self.max_model_len = max_model_len
        self.stats = EngineStats()
        self.delay = delay
        self.start_error = start_error
        self.calls = 0
        self.priorities: list[int] = []  # the priority each generate() and stream() call received
        self.samplings: list[Sampling] = []
        self.given: list[Prompt] = []  # what generate() and stream() were given, in call order
        self.streams = 0
        self.running: set[str] = set()
        self.aborted: list[str] = []
        self.finished: list[str] = []
        self.alive = True
        self._may_start = threading.Event()
        self._may_finish = threading.Event()
        self._may_start.set()
        self._may_finish.set()

    def hold_start(self) -> None:
        self._may_start.clear()

    def let_start(self) -> None:
        self._may_start.set()

    def hold(self) -> None:
        """Generations started from now on wait until let_go()."""
        self._may_finish.clear()

    def let_go(self) -> None:
        self._may_finish.set()

    async def start(self) -> None:
        await _wait_set(self._may_start)
        if self.start_error is not None:
            raise self.start_error

    def count_prompt_tokens(self, prompt: Prompt) -> int:
        # One "token" per character keeps budgets easy to reason about in tests.
        return len(prompt.messages[0]["content"]) if prompt.is_chat else len(prompt.text)

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        self.calls += 1
        self.priorities.append(priority)
        self.samplings.append(sampling)
        self.given.append(prompt)
        self.running.add(request_id)
        self.stats.record(len(self.running), 0)
        try:
            await asyncio.sleep(self.delay)
            await _wait_set(self._may_finish)
        except asyncio.CancelledError:
            self.aborted.append(request_id)
            raise
        finally:
            self.running.discard(request_id)
        self.finished.append(request_id)
        content = prompt.messages[0]["content"] if prompt.is_chat else prompt.text
        return Generation(f"<{len(content)}>", self.count_prompt_tokens(prompt), 1, "stop")

    async def stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> AsyncGenerator[Delta, None]:
        """generate()'s answer in two deltas: its first character, then (after delay and hold) the rest;
        a stream closed or cancelled in between counts as aborted."""
        self.calls += 1
        self.priorities.append(priority)
        self.streams += 1
        self.samplings.append(sampling)
        self.given.append(prompt)
        self.running.add(request_id)
        content = prompt.messages[0]["content"] if prompt.is_chat else prompt.text
        answer = f"<{len(content)}>"
        try:
            yield Delta(answer[:1])
            await asyncio.sleep(self.delay)
            await _wait_set(self._may_finish)
            yield Delta(answer[1:])
        except (asyncio.CancelledError, GeneratorExit):
            self.aborted.append(request_id)
            raise
        finally:
            self.running.discard(request_id)
        self.finished.append(request_id)
        yield Delta("", Generation(answer, self.count_prompt_tokens(prompt), 2, "stop"))

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)

    def is_alive(self) -> bool:
        return self.alive

    def unfinished(self) -> int:
        return len(self.running)

    def shutdown(self) -> None:
        self.alive = False


async def _wait_set(event: threading.Event) -> None:
    # Set from the test's thread, so polled rather than awaited as an asyncio.Event.
    while not event.is_set():
        await asyncio.sleep(0.005)


def wait_until(condition: Callable[[], bool], timeout_s: float = 10, what: str = "condition") -> None:
    """Poll until `condition()` holds; a failure names what never happened."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


@contextmanager
def serve_in_thread(app: FastAPI) -> Iterator[str]:
    """Run the app under a real Uvicorn server on a loopback port; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def make_config(**replica: Any) -> ServeConfig:
    """A replica config with a small cache and these replica settings."""
    return ServeConfig.model_validate({"replica": {"cache_entries": 100, **replica}})


def wait_ready(client: httpx.Client, timeout_s: float = 10) -> None:
    """Poll the app's /health until 200."""
    deadline = time.monotonic() + timeout_s
    while client.get("/health").status_code != 200:
        if time.monotonic() > deadline:
            raise AssertionError("app never became ready")
        time.sleep(0.02)


def gated(engine: Engine, max_num_seqs: int = 16) -> GatedEngine:
    """`engine` behind a bulk gate of the default settings, as the translation core gets it."""
    return GatedEngine(
        engine, bulk_gate(ReplicaConfig(), max_num_seqs, ReplicaConfig().interactive_reserve, {})
    )

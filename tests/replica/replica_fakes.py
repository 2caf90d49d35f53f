"""A scripted in-process engine and a Uvicorn-in-a-thread server, for tests of the app's pure logic."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from hunyuan_serve.prompts import Prompt
from hunyuan_serve.replica.engine import EngineStats, Generation, Sampling
from tests.support.stacks import free_port


class FakeEngine:
    """Answers '<n chars>' after `delay` seconds; counts calls, running requests and aborts."""

    def __init__(self, delay: float = 0.0, start_delay: float = 0.0, max_model_len: int = 1000) -> None:
        self.model_name = "fake"
        self.max_model_len = max_model_len
        self.stats = EngineStats()
        self.delay = delay
        self.start_delay = start_delay
        self.calls = 0
        self.running: set[str] = set()
        self.aborted: list[str] = []
        self.alive = True

    async def start(self) -> None:
        await asyncio.sleep(self.start_delay)

    def count_prompt_tokens(self, prompt: Prompt) -> int:
        # One "token" per character keeps budgets easy to reason about in tests.
        return len(prompt.messages[0]["content"]) if prompt.is_chat else len(prompt.text)

    async def generate(self, prompt: Prompt, sampling: Sampling, request_id: str) -> Generation:
        self.calls += 1
        self.running.add(request_id)
        self.stats.record(len(self.running), 0)
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.aborted.append(request_id)
            raise
        finally:
            self.running.discard(request_id)
        content = prompt.messages[0]["content"] if prompt.is_chat else prompt.text
        return Generation(f"<{len(content)}>", self.count_prompt_tokens(prompt), 1, "stop")

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)

    def is_alive(self) -> bool:
        return self.alive

    def unfinished(self) -> int:
        return len(self.running)

    def shutdown(self) -> None:
        self.alive = False


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

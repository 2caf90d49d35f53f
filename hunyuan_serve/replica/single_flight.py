"""One read in flight per key: the callers that ask while it runs share its result (asyncio)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SingleFlight(Generic[K, V]):
    """`do(key, read)` runs `read()` unless a read of `key` runs already, whose result it then awaits.

    A burst's thousand requests that all find a value stale would otherwise queue a thousand reads on
    a store's one I/O thread, and a person's request behind them. A caller that leaves (cancelled) does
    not cancel the read the others wait for; an error reaches every caller of that read.
    """

    def __init__(self) -> None:
        self._running: dict[K, asyncio.Task[V]] = {}

    async def do(self, key: K, read: Callable[[], Awaitable[V]]) -> V:
        task = self._running.get(key)
        if task is None:
            task = asyncio.ensure_future(read())
            self._running[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.shield(task)

    def running(self) -> int:
        return len(self._running)

    def _finished(self, key: K, task: asyncio.Task[V]) -> None:
        if self._running.get(key) is task:
            del self._running[key]
        if not task.cancelled():
            task.exception()  # read here too: where every caller left, nobody else would

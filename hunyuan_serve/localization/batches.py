"""A run's texts in batches, as many in flight as a width lets in, and that width, resizable meanwhile."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import TypeVar

T = TypeVar("T")
Progress = Callable[[int, int], None]  # (texts done, texts total)


def chunks(texts: Sequence[str], size: int) -> list[list[str]]:
    return [list(texts[i : i + size]) for i in range(0, len(texts), size)]


async def map_batches(
    texts: Sequence[str],
    size: int,
    workers: Width,
    most: int,
    work: Callable[[list[str]], Awaitable[T]],
    progress: Progress | None = None,
) -> list[T]:
    """work(batch) for each batch of `size` texts, as many at once as `workers` lets in (up to `most`, the
    widest it may grow to), results in order.

    Workers take the next batch only when they are free, so a work function that decides to stop
    sending (the service is gone) is asked about each remaining batch before anything is sent.
    The first exception cancels the batches in flight and is raised.
    """
    batches = chunks(texts, size)
    results: dict[int, T] = {}
    queue = iter(enumerate(batches))  # shared by the workers: next() never yields the loop
    done = 0

    async def worker() -> None:
        nonlocal done
        while True:
            async with workers:
                item = next(queue, None)
                if item is None:
                    return
                index, batch = item
                results[index] = await work(batch)
            done += len(batch)
            if progress is not None:
                progress(done, len(texts))

    # As many workers as may ever be let in (the width can grow once the service says what it takes).
    started = [asyncio.ensure_future(worker()) for _ in range(min(most, len(batches)))]
    try:
        await asyncio.gather(*started)
    finally:
        for task in started:
            task.cancel()
        await asyncio.gather(*started, return_exceptions=True)
    return [results[index] for index in range(len(batches))]


class Width:
    """An asyncio limit on work held at once whose size may change while work is held: a smaller one
    lets nothing new in until enough has left, a larger one lets waiters in at once. Plain futures, not
    a Condition, so giving a place back never waits (a cancelled task still gives it back)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    def resize(self, limit: int) -> None:
        self.limit = limit
        self._wake()

    def _wake(self) -> None:
        free = self.limit - self.held
        for waiter in self._waiting:
            if free <= 0:
                break
            if not waiter.done():
                waiter.set_result(None)
                free -= 1

    async def __aenter__(self) -> None:
        while self.held >= self.limit:
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # woken, then cancelled: the place it was offered goes to the next
                raise
            finally:
                self._waiting.remove(waiter)
        self.held += 1

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.held -= 1
        self._wake()

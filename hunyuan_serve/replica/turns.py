"""Work over a long batch that leaves the event loop its turns: per-text work in slices, and the waits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

# Texts handled between two turns of the event loop. A 100,000-character text is ~6,000 segments, and
# each step of its work (counting tokens, joining the engine calls, checking the answers, the cache
# entries) took 1-3 s in one piece on a 2-core machine (stand-in engine, cProfile), while /health and
# every other request waited: 64 at a time keeps each piece to tens of milliseconds.
TURN = 64


async def turn(index: int) -> None:
    """A turn of the event loop before the index-th text of every TURN-th (none before the first)."""
    if index and not index % TURN:
        await asyncio.sleep(0)


async def mapped(work: Callable[..., T], *columns: Iterable[Any]) -> list[T]:
    """[work(*row) for row in zip(*columns)], a turn of the event loop between slices of TURN rows."""
    done = []
    for index, row in enumerate(zip(*columns, strict=True)):
        await turn(index)
        done.append(work(*row))
    return done


async def results(tasks: list[asyncio.Task[T]]) -> list[T]:
    """Each task's result in order, the first failure raised (as gather raises it); a waiter cancelled
    here leaves the tasks running. No shield per task: for ~6,000 segments those took a second of the
    event loop in one piece."""
    if tasks:
        done, _ = await asyncio.wait(set(tasks), return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    return [task.result() for task in tasks]

"""A request's deadline as its work sees it: when it falls, answers in hand, a retry told to stop."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable, Collection, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class Deadline:
    """When the request being served answers 504 (`at`, time.monotonic()), and how far its work got:
    the core calls whose first answers are in hand, the retries of those under way, and `cut`, set when
    the deadline falls while one runs: the retry then stops and the answers in hand go out."""

    at: float
    in_hand: int = 0  # core calls (a request's texts, or one source language's) whose answers are in
    retrying: int = 0  # of those, the ones waiting for a retry's answers
    cut: asyncio.Event = field(default_factory=asyncio.Event)
    missed: dict[str, Any] = field(default_factory=dict)  # log(), as the deadline (and grace) left it

    @classmethod
    def after(cls, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> Deadline:
        return cls(clock() + timeout_s)

    def left(self, reserve_s: float, clock: Callable[[], float] = time.monotonic) -> float:
        """Seconds to the deadline less `reserve_s`; never below 0."""
        return max(0.0, self.at - reserve_s - clock())

    @contextlib.contextmanager
    def retry(self) -> Iterator[None]:
        """A retry under way, its first answers in hand: the deadline cuts it rather than answer 504."""
        self.retrying += 1
        try:
            yield
        finally:
            self.retrying -= 1

    def log(self) -> dict[str, Any]:
        """The 504 log line's account of the work: whether any answer was in hand, and a retry running
        (`missed` holds it as the deadline found them)."""
        return {"answer_in_hand": self.in_hand > 0, "qa_retry_running": self.retrying > 0}


# The request being served's (set by http.guarded for its work's task; None: no deadline).
CURRENT: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("hunyuan_deadline", default=None)


def answered() -> None:
    """The running core call's first answers are in hand (checked, a retry may follow)."""
    deadline = CURRENT.get()
    if deadline is not None:
        deadline.in_hand += 1


def started(deadline: Deadline, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """`work` in a task of its own that carries `deadline`."""
    context = contextvars.copy_context()
    context.run(CURRENT.set, deadline)
    return asyncio.get_running_loop().create_task(work, context=context)


async def settled(
    waited: Collection[asyncio.Future[Any]],
    deadline: Deadline,
    grace_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Until one of `waited` is done or the deadline passes. At the deadline, with answers in hand, a
    retry under way is cut and the work gets `grace_s` more to give them: the retry's own reserve
    (qa_retry_reserve_s, Review) is the first line, this the second, for an event loop too busy to keep
    to the first (a 504 there would throw away answers that exist)."""
    if not waited:
        return
    await asyncio.wait(waited, timeout=max(0.0, deadline.at - clock()), return_when=asyncio.FIRST_COMPLETED)
    if deadline.in_hand and not any(each.done() for each in waited):
        deadline.cut.set()
        await asyncio.wait(waited, timeout=grace_s, return_when=asyncio.FIRST_COMPLETED)
    if not any(each.done() for each in waited):
        deadline.missed = deadline.log()  # before the work is cancelled, which ends its retry


async def finished(deadline: Deadline, work: Coroutine[Any, Any, T], grace_s: float) -> T:
    """`work`'s result by the deadline, or by its grace where answers are in hand (settled); past them,
    or this call cancelled, the work is cancelled and ends first. TimeoutError when it was cut off."""
    task = started(deadline, work)
    try:
        await settled({task}, deadline, grace_s)
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        raise TimeoutError
    return task.result()

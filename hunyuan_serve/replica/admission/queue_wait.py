"""The wait a request would face in the replica's queue, from the rate it recently served (pure)."""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from hunyuan_serve.config.replica import bulk_slots
from hunyuan_serve.replica.admission.priority import BULK

# Gaps between answers a rate is read from: fewer say too little (one batch's answers end in the same
# engine step, then the next batch's a whole generation later), so the rate is unknown and nothing is
# refused for its wait.
MIN_GAPS = 8


class ServedRate:
    """Answers per second while every place was taken: the replica's capacity, not its demand (an idle
    replica answers slowly because little arrives). Only the gap between two answers that both ended
    with every place taken counts; gaps older than `window_s` are forgotten."""

    def __init__(self, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.clock = clock
        self._gaps: collections.deque[tuple[float, float]] = collections.deque()  # (ended, seconds)
        self._last: float | None = None  # the latest answer's time, when every place was taken then

    def served(self, saturated: bool) -> None:
        """One answer went out; `saturated`: every place was taken as it ended."""
        now = self.clock()
        if saturated and self._last is not None:
            self._gaps.append((now, now - self._last))
        self._last = now if saturated else None
        self._forget(now)

    def rate(self) -> float | None:
        """Answers per second, or None while too few gaps are known (or they took no time at all)."""
        self._forget(self.clock())
        total = sum(seconds for _, seconds in self._gaps)
        if len(self._gaps) < MIN_GAPS or total <= 0:
            return None
        return len(self._gaps) / total

    def _forget(self, now: float) -> None:
        while self._gaps and now - self._gaps[0][0] > self.window_s:
            self._gaps.popleft()


@dataclass(frozen=True)
class Queue:
    """What the rule reads: the places that run at once, the most that may wait, the bound on a wait."""

    room: int  # max_in_flight
    max_queued: int
    reserve: float  # interactive_reserve: bulk runs in bulk_slots(room) and waits in its share too
    max_wait_s: float  # max_queue_wait_s
    deadline_s: float  # request_timeout_s


def expected_wait_s(cls: str, in_flight: int, interactive: int, queue: Queue, rate: float | None) -> float:
    """Seconds until one more request of `cls` finds a place: those ahead of it past the places of its
    class, at the served rate. Interactive work is served first (the replica's queue for engine room),
    so only interactive work is ahead of it; every admitted request is ahead of bulk work. 0 at an
    unknown rate."""
    if rate is None:
        return 0.0
    if cls == BULK:
        ahead, places = in_flight, bulk_slots(queue.room, queue.reserve)
    else:
        ahead, places = interactive, queue.room
    return max(0, ahead + 1 - places) / rate


def wait_refusal(
    cls: str, in_flight: int, interactive: int, queue: Queue, rate: float | None
) -> tuple[str, float] | None:
    """None when one more request of `cls` may wait; else why not and the seconds until it might."""
    wait = expected_wait_s(cls, in_flight, interactive, queue, rate)
    bound, name = min((queue.max_wait_s, "max_queue_wait_s"), (queue.deadline_s, "request_timeout_s"))
    if wait <= bound:
        return None
    return f"the wait here would be about {wait:.1f} s, over {name}={bound:g}", wait - bound


def retry_after_s(least: int, over_s: float) -> int:
    """Retry-After for a refused wait: when the queue, served at its rate, would fit (at least `least`)."""
    return max(least, math.ceil(over_s))

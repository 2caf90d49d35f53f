"""The replica's own queue of bulk work over the width: what goes into the engine, and when."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

from hunyuan_serve.replica.bulk_width import WidthRule, next_key
from hunyuan_serve.replica.step_model import StepModel

# Past the window's end, so that the clock the rule reads has passed it too when the timer fires.
_WINDOW_SLACK_S = 0.01


@dataclass
class _Waiter:
    seqs: int
    ready: asyncio.Future[None]


@dataclass
class BulkGate:
    """Interactive sequences go straight in (and narrow the width); bulk ones take a place under the
    width or wait here, per key in arrival order, the next place going to the key furthest under its
    weighted share (bulk_width.next_key). Sequences count from submission until the engine call ends."""

    rule: WidthRule
    model: StepModel = field(default_factory=StepModel)
    weights: Mapping[str | None, int] = field(default_factory=dict)
    people: int = 0  # interactive sequences in the engine
    bulk: int = 0  # bulk sequences in the engine
    bulk_by_key: dict[str | None, int] = field(default_factory=dict)
    _queue: dict[str | None, collections.deque[_Waiter]] = field(default_factory=dict)
    _timer: asyncio.TimerHandle | None = None

    def width(self) -> int:
        return self.rule.width(self.model, self.people)

    def waiting(self) -> int:
        """Bulk sequences waiting here for a place."""
        return sum(w.seqs for queue in self._queue.values() for w in queue)

    def observe(self, seqs: int, seconds: float) -> None:
        """One engine step (the engine's stats hook): the model learns, and the width may move."""
        self.model.observe(seqs, seconds)
        if self._queue:
            self._pump()

    @contextlib.asynccontextmanager
    async def place(self, bulk: bool, key: str | None, seqs: int = 1) -> AsyncIterator[None]:
        """Held around one engine call of `seqs` sequences (n samples: n)."""
        if not bulk:
            self._person_arrived(seqs)
            try:
                yield
            finally:
                self.people -= seqs
                self._pump()
            return
        await self._take(key, seqs)
        try:
            yield
        finally:
            self._give(key, seqs)

    def _person_arrived(self, seqs: int) -> None:
        self.rule.interactive_arrived()
        self.people += seqs
        if self._timer is not None:
            self._timer.cancel()
        # When the window passes with nobody new, the width is full again: the queue moves then.
        delay = self.rule.settings.interactive_window_s + _WINDOW_SLACK_S
        self._timer = asyncio.get_running_loop().call_later(delay, self._pump)

    async def _take(self, key: str | None, seqs: int) -> None:
        if not self._queue and self._fits(seqs):
            self._hold(key, seqs)
            return
        waiter = _Waiter(seqs, asyncio.get_running_loop().create_future())
        self._queue.setdefault(key, collections.deque()).append(waiter)
        self._pump()
        try:
            await waiter.ready
        except BaseException:  # cancelled (the client left, the deadline passed)
            if waiter.ready.done() and not waiter.ready.cancelled():
                self._give(key, seqs)  # granted in the same moment: hand the place on
            else:
                self._drop(key, waiter)
            raise

    def _fits(self, seqs: int) -> bool:
        # One call wider than the width (an ensemble's n) still goes in alone, or it never would.
        return self.bulk == 0 or self.bulk + seqs <= self.width()

    def _hold(self, key: str | None, seqs: int) -> None:
        self.bulk += seqs
        self.bulk_by_key[key] = self.bulk_by_key.get(key, 0) + seqs

    def _give(self, key: str | None, seqs: int) -> None:
        self.bulk -= seqs
        left = self.bulk_by_key.get(key, 0) - seqs
        if left > 0:
            self.bulk_by_key[key] = left
        else:
            self.bulk_by_key.pop(key, None)
        self._pump()

    def _drop(self, key: str | None, waiter: _Waiter) -> None:
        queue = self._queue.get(key)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._queue[key]
        self._pump()

    def _pump(self) -> None:
        """Places under the width to the waiting keys, one at a time, the furthest under its share first."""
        while self._queue:
            key = next_key(self._queue, self.bulk_by_key, self.weights)
            queue = self._queue[key]
            cancelled = queue[0].ready.done()  # its caller left; its task has not run to _drop yet
            if not cancelled and not self._fits(queue[0].seqs):
                return
            waiter = queue.popleft()
            if not queue:
                del self._queue[key]
            if not cancelled:
                self._hold(key, waiter.seqs)
                waiter.ready.set_result(None)

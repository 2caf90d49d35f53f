"""The replica's own queue for engine room (people first, bulk fair per key), and the bulk width."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field

from hunyuan_serve.replica.admission import intake
from hunyuan_serve.replica.admission.bulk_width import WidthRule, next_key

# Past the window's end, so that the clock the rule reads has passed it too when the timer fires.
_WINDOW_SLACK_S = 0.01


@dataclass
class _Waiter:
    seqs: int
    ready: asyncio.Future[None]


@dataclass
class Placed:
    """One engine call under the gate; a person's call reports its pace here (GatedEngine)."""

    pace_s: float | None = None  # seconds per output token of the engine call, once it ended

    def took(self, engine_s: float, tokens: int) -> None:
        self.pace_s = engine_s / max(1, tokens)


@dataclass
class BulkGate:
    """The engine is handed at most `room` sequences (what it batches and a small margin: its own
    waiting queue stays short, and with it the replica's work per step); the rest wait here, in
    futures that cost the event loop nothing until a place frees. People's sequences wait in arrival
    order and go first; bulk ones also take one of the full width's places, waiting per key in arrival
    order, the next place going to the key furthest under its weighted share (bulk_width.next_key).
    Sequences count from submission until the engine call ends.

    The width a person's steps may carry beside them (WidthRule) goes to the engine's scheduler through
    `publish` whenever it may have moved: the scheduler pauses the rest of the running bulk in those
    steps, so the job keeps its places and goes on at full width between a person's strings."""

    rule: WidthRule
    weights: Mapping[str | None, int] = field(default_factory=dict)
    # Handed the width and the prompt tokens a step without a person may take (WidthRule.prompt_tokens).
    publish: Callable[[int, int | None], None] | None = None
    room: int = 0  # sequences in the engine at once, people's and bulk (0: no limit)
    people: int = 0  # interactive sequences in the engine
    bulk: int = 0  # bulk sequences in the engine
    bulk_by_key: dict[str | None, int] = field(default_factory=dict)
    _queue: dict[str | None, collections.deque[_Waiter]] = field(default_factory=dict)
    _people_queue: collections.deque[_Waiter] = field(default_factory=collections.deque)
    _timer: asyncio.TimerHandle | None = None
    _published: tuple[int, int | None] | None = None  # what publish was last handed

    def width(self) -> int:
        """The bulk a step that carries a person's sequence may carry now (full: any)."""
        return self.rule.width()

    def waiting(self) -> int:
        """Bulk sequences waiting here for a place."""
        return sum(w.seqs for queue in self._queue.values() for w in queue)

    def people_waiting(self) -> int:
        """People's sequences waiting here for engine room."""
        return sum(w.seqs for w in self._people_queue)

    @contextlib.asynccontextmanager
    async def place(
        self, bulk: bool, key: str | None, seqs: int = 1, raised: asyncio.Event | None = None
    ) -> AsyncIterator[Placed]:
        """Held around one engine call of `seqs` sequences (n samples: n). A bulk call whose `raised` is
        set while it waits here (a person joined it) leaves the queue and goes in as a person's."""
        call = Placed()
        intake.parked()  # from here the request waits, or runs in the engine: the next is taken in
        if bulk and not await self._take(key, seqs, raised):
            bulk = False
        if not bulk:
            await self._enter(seqs)
            probe = self._person_arrived()
            beside = self._beside()
            try:
                yield call
            finally:
                self.people -= seqs
                self.rule.person_done(call.pace_s, probe, max(beside, self._beside()))
                self._publish()
                self._pump()
            return
        try:
            yield call
        finally:
            self._give(key, seqs)

    def _beside(self) -> int:
        """The bulk the width lets beside a person now: none where the engine holds none."""
        return min(self.bulk, self.width())

    def _person_arrived(self) -> bool:
        probe = self.rule.interactive_arrived()
        self._publish()
        # When the window passes with nobody new, the width is full again: published then. One timer,
        # moved on when it fires early, not one per call: a long text's thousands of segments each
        # arrive as a person's call.
        if self._timer is None:
            self._arm(self.rule.settings.interactive_window_s)
        return probe

    def _arm(self, delay_s: float) -> None:
        self._timer = asyncio.get_running_loop().call_later(delay_s + _WINDOW_SLACK_S, self._window_end)

    def _window_end(self) -> None:
        self._timer = None
        left = self.rule.window_left_s()
        if left > 0:  # someone arrived since the timer was set
            self._arm(left)
        else:
            self._publish()

    def _publish(self) -> None:
        limits = (self.width(), self.rule.prompt_tokens())
        if self.publish is not None and limits != self._published:
            self._published = limits
            self.publish(*limits)

    async def _enter(self, seqs: int) -> None:
        """Engine room for a person's call: at once, or when the people ahead of it have theirs."""
        if not self._people_queue and self._room_for(seqs):
            self.people += seqs
            return
        waiter = _Waiter(seqs, asyncio.get_running_loop().create_future())
        self._people_queue.append(waiter)
        try:
            await waiter.ready
        except BaseException:  # cancelled (the client left, the deadline passed)
            if waiter.ready.done() and not waiter.ready.cancelled():
                self.people -= seqs  # granted in the same moment: hand the room on
            elif waiter in self._people_queue:
                self._people_queue.remove(waiter)
            self._pump()
            raise

    def _room_for(self, seqs: int) -> bool:
        # One call wider than the room (an ensemble's n) still goes into an empty engine.
        held = self.people + self.bulk
        return self.room <= 0 or held == 0 or held + seqs <= self.room

    async def _take(self, key: str | None, seqs: int, raised: asyncio.Event | None = None) -> bool:
        """A bulk place taken (True), or none needed: `raised` was set first (False)."""
        if raised is not None and raised.is_set():
            return False
        if not self._queue and not self._people_queue and self._fits(seqs):
            self._hold(key, seqs)
            return True
        waiter = _Waiter(seqs, asyncio.get_running_loop().create_future())
        self._queue.setdefault(key, collections.deque()).append(waiter)
        self._pump()
        try:
            await _first(waiter.ready, raised)
        except BaseException:  # cancelled (the client left, the deadline passed)
            if waiter.ready.done() and not waiter.ready.cancelled():
                self._give(key, seqs)  # granted in the same moment: hand the place on
            else:
                self._drop(key, waiter)
            raise
        if waiter.ready.done():
            return True
        self._drop(key, waiter)  # raised while it waited: a person's call now
        return False

    def _fits(self, seqs: int) -> bool:
        # One call wider than the width (an ensemble's n) still goes in alone, or it never would.
        return (self.bulk == 0 or self.bulk + seqs <= self.rule.full) and self._room_for(seqs)

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
        """Engine room to the people waiting, in arrival order; then, while none waits, places under
        the full width to the waiting keys, one at a time, the furthest under its share first."""
        while self._people_queue:
            waiter = self._people_queue[0]
            cancelled = waiter.ready.done()  # its caller left; its task has not run to remove it yet
            if not cancelled and not self._room_for(waiter.seqs):
                return
            self._people_queue.popleft()
            if not cancelled:
                self.people += waiter.seqs
                waiter.ready.set_result(None)
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


async def _first(ready: asyncio.Future[None], raised: asyncio.Event | None) -> None:
    """Until `ready` is done or `raised` is set, whichever comes first."""
    if raised is None:
        await ready
        return
    watch = asyncio.ensure_future(_set(raised))
    try:
        await asyncio.wait({ready, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()


async def _set(event: asyncio.Event) -> None:
    await event.wait()

"""The replica's intake: how many requests it takes in at once, so a burst cannot starve /health."""

from __future__ import annotations

import asyncio
import collections
import contextvars
import time
from collections.abc import Callable, Mapping

from starlette.types import ASGIApp, Receive, Scope, Send

from hunyuan_serve.auth import KEY_ID_STATE
from hunyuan_serve.replica.admission.priority import BULK, HEADER

# Paths answered past the intake at once: the supervisor's probe and Prometheus read the replica's
# state, which must stay current while thousands of requests wait to be taken in.
EXEMPT = frozenset({"/health", "/metrics"})
_HEADER = HEADER.lower().encode("latin-1")
# Where in the request's state the intake notes when the request reached it (time.monotonic()): the
# access log's intake_ms, the wait before the request was admitted or refused.
ARRIVED = "hs_arrived"
# Set in the request's state when the screen let it wait: its wait was judged as it came.
SCREENED = "hs_screened"

# What the request being taken in calls once it waits cheaply (in the replica's queue for engine room):
# its place in the intake goes to the next request.
_PARKED: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar("hs_intake", default=None)

# Asked of a request before it waits in the line, with how many go in before it: its refusal, when
# the replica would refuse it once taken in (an answer sent at once), else None.
Screen = Callable[[Scope, int], ASGIApp | None]


def parked() -> None:
    """The current request now waits without work for the loop: the intake takes the next one in."""
    release = _PARKED.get()
    if release is not None:
        release()


class Intake:
    """ASGI middleware, inside the key checks: at most `limit` requests are being taken in at once
    (their bodies read, parsed, admitted, prompts built and tokenized) until each is answered or waits
    for engine room (`parked`); the rest wait here in futures that cost the event loop nothing, people's
    first and each class in arrival order. Without it a burst of a thousand requests is a thousand
    intakes in one turn of one event loop, and a health probe or a person's string queued behind them
    waits for all of them; with it a probe waits for at most `limit`, a person for at most `limit` and
    the people ahead. The class read here is the X-Priority header's, else the key's default (the body
    is not read yet). /health and /metrics pass at once. 0: no limit. A request that would wait is
    first `screen`ed: one the replica would refuse once taken in gets that refusal at once, instead
    of after everyone ahead of it (seconds, under a burst far past what the replica holds); one it
    lets wait is marked SCREENED, its wait judged."""

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        key_defaults: Mapping[str, str] | None = None,
        screen: Screen | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.key_defaults: Mapping[str, str] = key_defaults or {}
        self.screen = screen
        self.taking = 0  # requests being taken in now
        self._people: collections.deque[asyncio.Future[None]] = collections.deque()
        self._bulk: collections.deque[asyncio.Future[None]] = collections.deque()

    def waiting(self) -> int:
        """Requests waiting to be taken in."""
        return len(self._people) + len(self._bulk)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.limit <= 0 or scope["type"] != "http" or scope["path"] in EXEMPT:
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})[ARRIVED] = time.monotonic()
        bulk = self._is_bulk(scope)
        if self.screen is not None and not self._free():
            refusal = self.screen(scope, self._ahead(bulk))
            if refusal is not None:  # refused before it waits: it holds no place
                await refusal(scope, receive, send)
                return
            scope["state"][SCREENED] = True
        await self._enter(self._bulk if bulk else self._people)
        release = _Release(self._leave)
        token = _PARKED.set(release)
        try:
            await self.app(scope, receive, send)
        finally:
            _PARKED.reset(token)
            release()

    def _is_bulk(self, scope: Scope) -> bool:
        header = next((v.decode("latin-1") for k, v in scope["headers"] if k == _HEADER), None)
        if header is not None:
            return header.strip().lower() == BULK
        owner = scope.get("state", {}).get(KEY_ID_STATE)
        return owner is not None and self.key_defaults.get(owner) == BULK

    def _free(self) -> bool:
        return self.taking < self.limit and not self.waiting()

    def _ahead(self, bulk: bool) -> int:
        """Requests that would be taken in before one more of this class: people's go first."""
        return len(self._people) + (len(self._bulk) if bulk else 0)

    async def _enter(self, line: collections.deque[asyncio.Future[None]]) -> None:
        if self._free():
            self.taking += 1
            return
        turn = asyncio.get_running_loop().create_future()
        line.append(turn)
        try:
            await turn
        except BaseException:  # the server stopping: a place granted in the same moment goes on
            if turn.done() and not turn.cancelled():
                self._leave()
            elif turn in line:
                line.remove(turn)
            raise

    def _leave(self) -> None:
        """A place freed: it goes to the first person waiting, else the first bulk request, else back."""
        for line in (self._people, self._bulk):
            while line:
                turn = line.popleft()
                if not turn.done():
                    turn.set_result(None)
                    return
        self.taking -= 1


class _Release:
    """Gives one request's place back once, whichever comes first: parked or answered."""

    def __init__(self, leave: Callable[[], None]) -> None:
        self._leave: Callable[[], None] | None = leave

    def __call__(self) -> None:
        leave, self._leave = self._leave, None
        if leave is not None:
            leave()

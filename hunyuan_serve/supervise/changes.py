"""The change signal the supervisor's waiting steps re-check on: a state, the routing or a config taken."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from hunyuan_serve.run.seams import Clock

_T = TypeVar("_T")


class Changes:
    """Set by whoever changed something another task waits on; `until` re-checks after each change."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._event = asyncio.Event()

    def changed(self) -> None:
        self._event.set()

    async def until(self, check: Callable[[], _T | None], timeout_s: float | None = None) -> _T | None:
        """check() once it is not None, re-checked whenever something changed; None after timeout_s."""
        deadline = None if timeout_s is None else self.clock.now() + timeout_s
        while (found := check()) is None:
            if deadline is not None and self.clock.now() >= deadline:
                return None
            self._event.clear()
            waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._event.wait())}
            if deadline is not None:
                waits.add(asyncio.ensure_future(self.clock.sleep(deadline - self.clock.now())))
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
        return found

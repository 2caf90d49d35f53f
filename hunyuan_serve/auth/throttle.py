"""Wrong API keys from one client address slowed: past a count in a window, 429s for a while."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from hunyuan_serve.config import AuthConfig

# Addresses remembered at once: past it the stale ones are dropped first, so a flood of spoofed
# sources cannot grow the table without bound.
MAX_ADDRESSES = 65_536
SLOWED_MESSAGE = "too many wrong API keys from this address; retry after {seconds}s"


class BadKeys:
    """Per client address: the times of its recent wrong keys, and until when it is slowed.

    Only wrong keys count, and only they are slowed: a right key from the same address still passes,
    so one broken script behind a shared NAT does not lock the whole team out."""

    def __init__(
        self, limit: int, window_s: float, retry_after_s: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self.retry_after_s = retry_after_s
        self.clock = clock
        self._seen: dict[str, deque[float]] = {}
        self._slowed_until: dict[str, float] = {}

    @classmethod
    def of(cls, cfg: AuthConfig) -> BadKeys:
        return cls(cfg.bad_key_limit, cfg.bad_key_window_s, cfg.bad_key_retry_after_s)

    def slowed_for(self, address: str) -> int | None:
        """Seconds the address is still slowed for (its Retry-After), or None when it is not."""
        until = self._slowed_until.get(address)
        if until is None:
            return None
        left = until - self.clock()
        if left <= 0:
            del self._slowed_until[address]
            return None
        return max(1, math.ceil(left))

    def wrong(self, address: str) -> int | None:
        """Count a wrong key from address; the Retry-After when this one took it past the limit."""
        if self.limit == 0:
            return None
        now = self.clock()
        seen = self._seen.setdefault(address, deque())
        while seen and seen[0] <= now - self.window_s:
            seen.popleft()
        seen.append(now)
        if len(seen) <= self.limit:
            self._bound()
            return None
        del self._seen[address]  # the pause starts afresh: its own count begins after it
        self._slowed_until[address] = now + self.retry_after_s
        return self.retry_after_s

    def _bound(self) -> None:
        if len(self._seen) + len(self._slowed_until) <= MAX_ADDRESSES:
            return
        now = self.clock()
        for address in [a for a, until in self._slowed_until.items() if until <= now]:
            del self._slowed_until[address]
        horizon = now - self.window_s
        for address in [a for a, seen in self._seen.items() if not seen or seen[-1] <= horizon]:
            del self._seen[address]
        while len(self._seen) > MAX_ADDRESSES:  # all recent: the oldest inserted go first
            del self._seen[next(iter(self._seen))]

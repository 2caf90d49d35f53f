"""How many requests a client keeps in flight: fixed, or sized from what the service says it batches."""

from __future__ import annotations

import asyncio
import collections
import math
from types import TracebackType

from hunyuan_serve.client.settings import ClientSettings

# Sent by the service's Nginx with each proxied answer (edge/capacity.py edge_bulk_texts).
BULK_TEXTS_HEADER = "X-Hunyuan-Bulk-Texts"


def parse_bulk_texts(value: str | None) -> int | None:
    """The header's count of texts, or None when absent or not a positive whole number."""
    if value is None or not value.strip().isdigit():
        return None
    count = int(value)
    return count or None


def requests_in_flight(settings: ClientSettings, bulk_texts: int | None) -> int:
    """settings.concurrency when set. Else, for bulk work, enough batches to fill what the service's
    ready engines batch for bulk (bulk_texts), within 1..max_connections (more would wait for a pooled
    connection); start_concurrency until the service has said, and always for interactive work."""
    if settings.concurrency is not None:
        return settings.concurrency
    if bulk_texts is None or settings.priority != "bulk":
        return settings.start_concurrency
    return max(1, min(settings.max_connections, math.ceil(bulk_texts / settings.batch_size)))


def most_in_flight(settings: ClientSettings) -> int:
    """The widest requests_in_flight can ever make it: the workers a batch run starts up front."""
    return settings.concurrency or max(settings.max_connections, settings.start_concurrency)


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

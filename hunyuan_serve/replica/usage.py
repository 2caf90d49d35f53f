"""Characters per API key and each key's limit: counted where the work is done, summed in the store."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter

from hunyuan_serve.edge.dialects import QUOTA_EXCEEDED
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.storage.backend import StoreUnavailable
from hunyuan_serve.storage.per_key import Store

logger = logging.getLogger(__name__)
# Enough of the key's SHA-256 to tell keys apart in /metrics and logs, too little to stand for it.
LABEL_CHARS = 12
__all__ = ["QUOTA_EXCEEDED", "Usage", "key_label"]


def key_label(key_id: str) -> str:
    return key_id[:LABEL_CHARS]


class Usage:
    """Each key's count lives in the store (every replica and host adds to the same one); the limits
    come from the keys file (`KEY limit=N`; a key without one is unlimited).

    The store failing never fails a translation: the check lets the request through and the lost add
    is logged and counted, as the cache treats its own layer (a quota is not worth an outage).
    """

    def __init__(
        self, limits: Mapping[str, int | None], store: Store, registry: CollectorRegistry | None = None
    ) -> None:
        self.limits = dict(limits)
        self.store = store
        self.characters = Counter(
            "hunyuan_key_characters",
            "Characters this replica translated per API key (key: its SHA-256 prefix), cached answers too.",
            ["key"],
            registry=registry,
        )
        self.errors = Counter(
            "hunyuan_usage_store_errors",
            "Usage reads or adds the store did not answer (the check let the request through).",
            ["op"],
            registry=registry,
        )
        # Adds not yet in the store, by key, and the future their callers wait on: one write per key
        # for all of them (a burst's answers each waited for a write of its own on the store's one
        # thread, a person's behind a thousand of a job's).
        self._pending: dict[str, int] = {}
        self._written: asyncio.Future[None] | None = None
        self._writer: asyncio.Task[None] | None = None

    def limit(self, key_id: str | None) -> int | None:
        return None if key_id is None else self.limits.get(key_id)

    async def check(self, key_id: str | None, count: int) -> None:
        """A 429 quota_exceeded (each API renders its own status) when count takes the key past its limit."""
        limit = self.limit(key_id)
        if key_id is None or limit is None:
            return
        try:
            used = await self.store.characters(key_id)
        except StoreUnavailable as err:
            logger.warning("usage check of key %s skipped: %s", key_label(key_id), err)
            self.errors.labels(op="check").inc()
            return
        if used + count > limit:
            raise ApiError(
                429,
                QUOTA_EXCEEDED,
                f"Quota exceeded: this key has translated {used} of its {limit} characters, "
                f"and this request has {count}.",
            )

    async def add(self, key_id: str | None, count: int) -> None:
        """Count a successful translation's characters for the key (nothing without a keys file)."""
        if key_id is None or count <= 0:
            return
        self.characters.labels(key=key_label(key_id)).inc(count)
        self._pending[key_id] = self._pending.get(key_id, 0) + count
        if self._written is None:
            self._written = asyncio.get_running_loop().create_future()
        written = self._written
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write())
        await asyncio.shield(written)  # stored once this returns: a read after the answer sees it

    async def _write(self) -> None:
        """Writes what is pending, one add per key, until nothing is; adds made meanwhile go in the next
        round, together."""
        while self._written is not None:
            pending, written = self._pending, self._written
            self._pending, self._written = {}, None
            try:
                for key_id, count in pending.items():
                    await self._add(key_id, count)
            finally:  # whatever happened, no caller waits for ever
                written.set_result(None)

    async def _add(self, key_id: str, count: int) -> None:
        try:
            await self.store.add_characters(key_id, count)
        except StoreUnavailable as err:
            logger.warning("usage of key %s not counted (%d characters): %s", key_label(key_id), count, err)
            self.errors.labels(op="add").inc()

    async def used(self, key_id: str) -> int:
        return await self.store.characters(key_id)

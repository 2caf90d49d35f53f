"""Translation cache: an in-process LRU before one shared layer, a SQLite file (one host) or Redis (many)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from hunyuan_serve.cache.events import CacheEvents, NoEvents
from hunyuan_serve.cache.memory import LruCache
from hunyuan_serve.cache.redis_layer import RedisCache, RedisSettings
from hunyuan_serve.cache.sqlite import SqliteCache

if TYPE_CHECKING:
    from hunyuan_serve.config import ReplicaConfig

Layer = Literal["memory", "sqlite", "redis"]
Hit = tuple[str, Layer]
logger = logging.getLogger(__name__)


class TranslationCache:
    """Memory first, then the one shared layer (a SQLite file or Redis); a shared hit is copied into memory.

    The file is used on one I/O thread of its own: SQLite waits for another replica's write lock
    (up to busy_timeout_s) and fsyncs at checkpoints, and neither may stall the event loop. Redis is
    asynchronous and bounded by its own short timeouts. Writes are not awaited: the answer is in
    memory already, and a lost write only costs a miss. Lookups that come while a read runs are read
    together next, and puts not yet written are joined, so a burst costs that thread a few jobs, not
    one per request in a line that a person's lookup waits at the end of.
    """

    def __init__(
        self,
        capacity: int,
        path: str | Path | None = None,
        busy_timeout_s: float = 5.0,
        redis: RedisSettings | None = None,
        events: CacheEvents | None = None,
    ) -> None:
        if path and redis:
            raise ValueError("one shared cache layer: a SQLite path or Redis, not both")
        self.events = events or NoEvents()
        self.memory: LruCache[str, str] = LruCache(capacity)
        self.file = SqliteCache(path, busy_timeout_s) if path else None
        self.redis = RedisCache(redis, self.events) if redis else None
        # Its thread starts with the first file access, so a cache without a file never has one.
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-io")
        self._writes: set[asyncio.Task[None]] = set()
        # File writes waiting for the next one, joined (the lock: put_many on the loop, the write on
        # the I/O thread), and that write's future (None: none queued).
        self._write_lock = threading.Lock()
        self._to_write: dict[str, str] = {}
        self._next_write: Future[None] | None = None
        # File lookups waiting for the next read, and the task that reads them (None: none waits).
        self._reads: list[tuple[list[str], asyncio.Future[dict[str, str]]]] = []
        self._reader: asyncio.Task[None] | None = None

    @classmethod
    def from_config(cls, cfg: ReplicaConfig, events: CacheEvents | None = None) -> TranslationCache:
        redis = None
        if cfg.cache_redis_url:
            redis = RedisSettings.of_replica(cfg, cfg.cache_redis_ttl_s)
        return cls(cfg.cache_entries, cfg.cache_path, cfg.cache_busy_timeout_s, redis, events)

    async def get(self, key: str) -> Hit | None:
        return (await self.get_many([key]))[0]

    async def get_many(self, keys: Sequence[str]) -> list[Hit | None]:
        """Each key's value and the layer it came from: memory first, then one shared lookup for the
        rest (one I/O hop for a batch, not one per text); a shared hit is copied into memory."""
        hits: list[Hit | None] = [None] * len(keys)
        missing: list[int] = []
        for index, key in enumerate(keys):
            value = self.memory.get(key)
            if value is None:
                missing.append(index)
            else:
                hits[index] = (value, "memory")
        if missing:
            shared = await self._shared_get_many([keys[index] for index in missing])
            for index, hit in zip(missing, shared, strict=True):
                if hit is not None:
                    self.memory.put(keys[index], hit[0])
                    hits[index] = hit
        return hits

    async def _shared_get_many(self, keys: list[str]) -> list[Hit | None]:
        if self.redis is not None:
            return [None if value is None else (value, "redis") for value in await self.redis.get_many(keys)]
        if self.file is None:
            return [None] * len(keys)
        try:
            found = await self._file_get_many(self.file, keys)
        except sqlite3.Error as err:  # a broken or locked file is a miss, not a failed request
            logger.warning("cache read failed: %s", err)
            self.events.cache_error("sqlite", "get")
            return [None] * len(keys)
        return [None if key not in found else (found[key], "sqlite") for key in keys]

    async def _file_get_many(self, file: SqliteCache, keys: list[str]) -> dict[str, str]:
        """The file's values for `keys`, read in one I/O-thread job with every lookup that came while
        the last one ran: a burst's thousand lookups are a few reads, not a queue of a thousand that a
        person's lookup waits at the end of."""
        waiter: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()
        self._reads.append((keys, waiter))
        if self._reader is None:
            self._reader = asyncio.get_running_loop().create_task(self._read_waiting(file))
        return await waiter

    async def _read_waiting(self, file: SqliteCache) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._reads:
                batch, self._reads = self._reads, []
                wanted = list(dict.fromkeys(key for keys, _ in batch for key in keys))
                try:
                    found = await loop.run_in_executor(self._io, file.get_many, wanted)
                except Exception as err:  # each lookup of this read fails as it would have alone
                    for _, waiter in batch:
                        if not waiter.done():
                            waiter.set_exception(err)
                    continue
                for _, waiter in batch:
                    if not waiter.done():
                        waiter.set_result(found)
        finally:
            self._reader = None

    def put(self, key: str, value: str) -> Future[None] | None:
        return self.put_many({key: value})

    def put_many(self, items: Mapping[str, str]) -> Future[None] | None:
        """Store in memory now; the shared write is queued, all items in one (a file write's future is
        returned)."""
        for key, value in items.items():
            self.memory.put(key, value)
        if not items:
            return None
        if self.redis is not None:
            task = asyncio.get_running_loop().create_task(self.redis.set_many(dict(items)))
            self._writes.add(task)  # held until done: the loop keeps only weak references to tasks
            task.add_done_callback(self._writes.discard)
            return None
        if self.file is None:
            return None
        with self._write_lock:  # joined to the write not started yet, if one is queued
            self._to_write.update(items)
            if self._next_write is None:
                self._next_write = self._io.submit(self._write_waiting, self.file)
            return self._next_write

    def _write_waiting(self, file: SqliteCache) -> None:
        """On the I/O thread: every item put since the last write began, in one transaction."""
        with self._write_lock:
            items, self._to_write, self._next_write = self._to_write, {}, None
        try:
            file.put_many(items)
        except sqlite3.Error as err:
            logger.warning("cache write failed: %s", err)
            self.events.cache_error("sqlite", "set")

    async def flush(self) -> None:
        """Wait for the Redis writes queued so far (each bounded by the Redis timeouts)."""
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)

    async def aclose(self) -> None:
        """Finish the queued writes, then close Redis and the file."""
        await self.flush()
        if self.redis is not None:
            await self.redis.aclose()
        self.close()

    def close(self) -> None:
        """Finish the file writes already queued, then close the file (aclose also closes Redis)."""
        self._io.shutdown(wait=True)
        if self.file is not None:
            self.file.close()

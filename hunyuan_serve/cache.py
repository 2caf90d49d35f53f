"""Translation cache: a bounded in-process LRU before an optional SQLite (WAL) file shared by replicas."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

Layer = Literal["memory", "sqlite"]
K = TypeVar("K")
V = TypeVar("V")
logger = logging.getLogger(__name__)


def cache_key(
    model: str,
    source: str,
    target: str,
    text: str,
    sampling: Mapping[str, Any],
    instructions: Mapping[str, Any] | None = None,
) -> str:
    """A stable digest of everything that decides the output: model, languages, text, sampling, and the
    prompt's instructions (its family, the glossary terms sent, context, style, preserve_format)."""
    fields: dict[str, Any] = {
        "model": model,
        "source": source,
        "target": target,
        "text": text,
        "sampling": dict(sampling),
    }
    if instructions:
        fields["instructions"] = dict(instructions)
    payload = json.dumps(fields, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class LruCache(Generic[K, V]):
    """At most `capacity` entries; the least recently used goes first. Capacity 0 stores nothing."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        if self.capacity <= 0:
            return
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)


class SqliteCache:
    """A key-value table in one SQLite file; WAL mode lets several replica processes read and write it."""

    def __init__(self, path: str | Path, busy_timeout_s: float = 5.0) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # Any one thread may use it (TranslationCache keeps it on its own I/O thread).
        self._db = sqlite3.connect(
            str(path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS translations"
            " (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)"
        )

    def get(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM translations WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, value: str) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO translations (key, value, created) VALUES (?, ?, ?)",
            (key, value, time.time()),
        )

    def journal_mode(self) -> str:
        return str(self._db.execute("PRAGMA journal_mode").fetchone()[0])

    def close(self) -> None:
        self._db.close()


class TranslationCache:
    """Memory first, then the shared file; a file hit is copied into memory.

    The file is used on one I/O thread of its own: SQLite waits for another replica's write lock
    (up to busy_timeout_s) and fsyncs at checkpoints, and neither may stall the event loop.
    Writes are not awaited: the answer is in memory already, and a lost write only costs a miss.
    """

    def __init__(self, capacity: int, path: str | Path | None = None, busy_timeout_s: float = 5.0) -> None:
        self.memory: LruCache[str, str] = LruCache(capacity)
        self.file = SqliteCache(path, busy_timeout_s) if path else None
        # Its thread starts with the first file access, so a cache without a file never has one.
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-io")

    async def get(self, key: str) -> tuple[str, Layer] | None:
        value = self.memory.get(key)
        if value is not None:
            return value, "memory"
        if self.file is not None:
            loop = asyncio.get_running_loop()
            try:
                value = await loop.run_in_executor(self._io, self.file.get, key)
            except sqlite3.Error as err:  # a broken or locked file is a miss, not a failed request
                logger.warning("cache read failed: %s", err)
                return None
            if value is not None:
                self.memory.put(key, value)
                return value, "sqlite"
        return None

    def put(self, key: str, value: str) -> Future[None] | None:
        """Store in memory now; the file write is queued, and its future returned for whoever cares."""
        self.memory.put(key, value)
        if self.file is None:
            return None
        return self._io.submit(self._write, self.file, key, value)

    @staticmethod
    def _write(file: SqliteCache, key: str, value: str) -> None:
        try:
            file.put(key, value)
        except sqlite3.Error as err:
            logger.warning("cache write failed: %s", err)

    def close(self) -> None:
        """Finish the writes already queued, then close the file."""
        self._io.shutdown(wait=True)
        if self.file is not None:
            self.file.close()

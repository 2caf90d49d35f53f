"""The translation cache's one-host shared layer: a key-value table in a SQLite file (WAL mode)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from hunyuan_serve.sqlite_in import in_slices


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
        return self.get_many([key]).get(key)

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """The values the file holds for these keys (one query per slice of them)."""
        found: dict[str, str] = {}
        for part, marks in in_slices(keys):
            query = f"SELECT key, value FROM translations WHERE key IN ({marks})"
            found.update((str(key), str(value)) for key, value in self._db.execute(query, part))
        return found

    def put(self, key: str, value: str) -> None:
        self.put_many({key: value})

    def put_many(self, items: Mapping[str, str]) -> None:
        """All in one transaction: one write lock and one WAL commit for a batch's answers."""
        now = time.time()
        self._db.execute("BEGIN IMMEDIATE")  # the write lock first: waits busy_timeout_s for another writer
        try:
            self._db.executemany(
                "INSERT OR REPLACE INTO translations (key, value, created) VALUES (?, ?, ?)",
                [(key, value, now) for key, value in items.items()],
            )
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def journal_mode(self) -> str:
        return str(self._db.execute("PRAGMA journal_mode").fetchone()[0])

    def close(self) -> None:
        self._db.close()

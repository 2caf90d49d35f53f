"""What every store shares: its one error, and a SQLite file opened in WAL mode."""

from __future__ import annotations

import sqlite3
from pathlib import Path


class StoreUnavailable(Exception):
    """The store did not answer (a locked or broken file, Redis away or slow); the message says which."""


def open_wal(path: Path, busy_timeout_s: float, schema: tuple[str, ...]) -> sqlite3.Connection:
    """A store's SQLite file in autocommit and WAL mode, schema applied."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    for statement in schema:
        db.execute(statement)
    return db

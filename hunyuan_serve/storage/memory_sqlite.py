"""Translation memories in the host's store file (SQLite, WAL), beside the glossaries."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from hunyuan_serve.storage.backend import StoreUnavailable, open_wal
from hunyuan_serve.storage.memory import Hit, MemoryFull, Origin, Unit

T = TypeVar("T")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS memory_origins"
    " (id TEXT PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS memory_origins_owner ON memory_origins (owner)",
    # One row a source text per language pair and owner: a later import of the same source replaces it.
    "CREATE TABLE IF NOT EXISTS memory_units (owner TEXT NOT NULL, src TEXT NOT NULL, tgt TEXT NOT NULL,"
    " source TEXT NOT NULL, target TEXT NOT NULL, origin TEXT NOT NULL,"
    " PRIMARY KEY (owner, src, tgt, source)) WITHOUT ROWID",
    # Bumped by every change of an owner's memory: a replica's fuzzy index is rebuilt when it moved.
    "CREATE TABLE IF NOT EXISTS memory_versions (owner TEXT PRIMARY KEY, version INTEGER NOT NULL)",
)
_BUMP = "INSERT INTO memory_versions VALUES (?, 1) ON CONFLICT (owner) DO UPDATE SET version = version + 1"
# SQLite's default limit on a statement's parameters is 32766; a batch's texts are asked in chunks.
_CHUNK = 500


class SqliteMemory:
    """Every owner's memory in one SQLite file that all replicas of the host open; an import is one
    transaction (all of it or none), its size bound checked inside it."""

    def __init__(self, path: str | Path, busy_timeout_s: float = 5.0) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._db: sqlite3.Connection | None = None
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-io")

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            if self._db is None:
                self._db = open_wal(self.path, self.busy_timeout_s, _SCHEMA)
            return work(self._db)

        try:
            return await asyncio.get_running_loop().run_in_executor(self._io, call)
        except (sqlite3.Error, OSError) as err:
            raise StoreUnavailable(f"store file {self.path}: {err}") from None

    async def add(self, origin: Origin, units: list[Unit], max_units: int) -> int:
        rows = [(origin.owner, u.src, u.tgt, u.source, u.target, origin.id) for u in units]

        def write(db: sqlite3.Connection) -> int:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "INSERT INTO memory_origins VALUES (?, ?, ?)", (origin.id, origin.owner, origin.to_json())
                )
                db.executemany("INSERT OR REPLACE INTO memory_units VALUES (?, ?, ?, ?, ?, ?)", rows)
                total = _count(db, origin.owner)
                if total > max_units:
                    raise MemoryFull(
                        f"the memory would hold {total} units; the limit is {max_units} "
                        "(replica.memory_max_units): nothing was imported"
                    )
                db.execute(_BUMP, (origin.owner,))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return total

        return await self._run(write)

    async def origins(self, owner: str) -> list[Origin]:
        query = "SELECT body FROM memory_origins WHERE owner = ? ORDER BY rowid"
        rows = await self._run(lambda db: db.execute(query, (owner,)).fetchall())
        return [Origin.from_json(row[0]) for row in rows]

    async def delete(self, owner: str, origin_id: str | None) -> int:
        def remove(db: sqlite3.Connection) -> int:
            db.execute("BEGIN IMMEDIATE")
            try:
                if origin_id is None:
                    gone = db.execute("DELETE FROM memory_units WHERE owner = ?", (owner,)).rowcount
                    found = db.execute("DELETE FROM memory_origins WHERE owner = ?", (owner,)).rowcount
                else:
                    where = "owner = ? AND origin = ?"
                    gone = db.execute(f"DELETE FROM memory_units WHERE {where}", (owner, origin_id)).rowcount
                    query = "DELETE FROM memory_origins WHERE owner = ? AND id = ?"
                    found = db.execute(query, (owner, origin_id)).rowcount
                if gone or found:
                    db.execute(_BUMP, (owner,))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return gone if found or gone else -1

        return await self._run(remove)

    async def units(self, owner: str) -> list[Unit]:
        query = "SELECT src, tgt, source, target FROM memory_units WHERE owner = ? ORDER BY src, tgt, source"
        rows = await self._run(lambda db: db.execute(query, (owner,)).fetchall())
        return [Unit(*row) for row in rows]

    async def exact(self, owners: list[str], src: str, tgt: str, texts: list[str]) -> dict[str, Hit]:
        wanted = list(dict.fromkeys(texts))

        def read(db: sqlite3.Connection) -> dict[str, Hit]:
            found: dict[str, Hit] = {}
            for owner in owners:  # the first owner's unit wins
                for start in range(0, len(wanted), _CHUNK):
                    chunk = [t for t in wanted[start : start + _CHUNK] if t not in found]
                    if not chunk:
                        continue
                    marks = ",".join("?" * len(chunk))
                    query = (
                        "SELECT source, target, origin FROM memory_units"
                        f" WHERE owner = ? AND src = ? AND tgt = ? AND source IN ({marks})"
                    )
                    for source, target, origin in db.execute(query, (owner, src, tgt, *chunk)):
                        found[source] = Hit(target, owner, origin)
            return found

        return await self._run(read)

    async def pair_units(self, owner: str, src: str, tgt: str) -> list[tuple[str, str]]:
        query = "SELECT source, target FROM memory_units WHERE owner = ? AND src = ? AND tgt = ?"
        rows = await self._run(lambda db: db.execute(query, (owner, src, tgt)).fetchall())
        return [(row[0], row[1]) for row in rows]

    async def versions(self, owners: list[str]) -> tuple[int, ...]:
        marks = ",".join("?" * len(owners))
        query = f"SELECT owner, version FROM memory_versions WHERE owner IN ({marks})"
        rows = dict(await self._run(lambda db: db.execute(query, owners).fetchall()))
        return tuple(int(rows.get(owner, 0)) for owner in owners)

    async def pairs(self, owners: list[str]) -> set[tuple[str, str]]:
        marks = ",".join("?" * len(owners))
        query = f"SELECT DISTINCT src, tgt FROM memory_units WHERE owner IN ({marks})"
        rows = await self._run(lambda db: db.execute(query, owners).fetchall())
        return {(row[0], row[1]) for row in rows}

    async def aclose(self) -> None:
        self._io.shutdown(wait=True)
        if self._db is not None:
            self._db.close()


def _count(db: sqlite3.Connection, owner: str) -> int:
    return int(db.execute("SELECT count(*) FROM memory_units WHERE owner = ?", (owner,)).fetchone()[0])

"""Per-key state (DeepL glossaries, characters translated): a SQLite file a host, or Redis for all."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from hunyuan_serve.cache.redis_layer import RedisSettings, redacted, redis_client, redis_errors
from hunyuan_serve.storage.backend import StoreUnavailable, open_wal
from hunyuan_serve.storage.glossary import Glossary

if TYPE_CHECKING:
    from redis.asyncio import Redis

T = TypeVar("T")


class Store(Protocol):
    """What the replica keeps per key; every call raises StoreUnavailable when the store does not answer."""

    async def create_glossary(self, glossary: Glossary) -> None: ...

    async def glossary(self, owner: str, glossary_id: str) -> Glossary | None: ...

    async def glossaries(self, owner: str) -> list[Glossary]: ...

    async def delete_glossary(self, owner: str, glossary_id: str) -> bool: ...

    async def add_characters(self, owner: str, count: int) -> int: ...

    async def characters(self, owner: str) -> int: ...

    async def aclose(self) -> None: ...


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS glossaries (id TEXT PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS glossaries_owner ON glossaries (owner)",
    "CREATE TABLE IF NOT EXISTS usage (owner TEXT PRIMARY KEY, characters INTEGER NOT NULL)",
)


class SqliteStore:
    """Tables in one SQLite file in WAL mode, which every replica of the host opens: a write is one
    statement (one transaction), so nothing is ever half stored, and counts add up across processes.

    The file is opened at its first use (a replica no client asks for glossaries or usage makes none),
    and used on one thread of its own: a wait for another replica's lock must not stall the event loop.
    """

    def __init__(self, path: str | Path, busy_timeout_s: float = 5.0) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._db: sqlite3.Connection | None = None
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-io")

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = open_wal(self.path, self.busy_timeout_s, _SCHEMA)
        return self._db

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            return work(self._open())

        try:
            return await asyncio.get_running_loop().run_in_executor(self._io, call)
        except (sqlite3.Error, OSError) as err:
            raise StoreUnavailable(f"store file {self.path}: {err}") from None

    async def create_glossary(self, glossary: Glossary) -> None:
        row = (glossary.id, glossary.owner, glossary.to_json())
        await self._run(lambda db: db.execute("INSERT INTO glossaries VALUES (?, ?, ?)", row))

    async def glossary(self, owner: str, glossary_id: str) -> Glossary | None:
        query = "SELECT body FROM glossaries WHERE id = ? AND owner = ?"
        row = await self._run(lambda db: db.execute(query, (glossary_id, owner)).fetchone())
        return None if row is None else Glossary.from_json(row[0])

    async def glossaries(self, owner: str) -> list[Glossary]:
        query = "SELECT body FROM glossaries WHERE owner = ? ORDER BY rowid"
        rows = await self._run(lambda db: db.execute(query, (owner,)).fetchall())
        return [Glossary.from_json(row[0]) for row in rows]

    async def delete_glossary(self, owner: str, glossary_id: str) -> bool:
        query = "DELETE FROM glossaries WHERE id = ? AND owner = ?"
        cursor = await self._run(lambda db: db.execute(query, (glossary_id, owner)))
        return cursor.rowcount > 0

    async def add_characters(self, owner: str, count: int) -> int:
        # One statement: the add and the read of the new total are one transaction, whoever else writes.
        query = (
            "INSERT INTO usage VALUES (?, ?) ON CONFLICT (owner) DO UPDATE"
            " SET characters = characters + excluded.characters RETURNING characters"
        )
        row = await self._run(lambda db: db.execute(query, (owner, count)).fetchone())
        return int(row[0])

    async def characters(self, owner: str) -> int:
        query = "SELECT characters FROM usage WHERE owner = ?"
        row = await self._run(lambda db: db.execute(query, (owner,)).fetchone())
        return 0 if row is None else int(row[0])

    def journal_mode(self) -> str:
        return str(self._open().execute("PRAGMA journal_mode").fetchone()[0])

    async def aclose(self) -> None:
        self._io.shutdown(wait=True)
        if self._db is not None:
            self._db.close()


class RedisStore:
    """The same state in Redis, under the cache's prefix: a glossary is a JSON string plus its id in its
    owner's set, both written in one MULTI (nothing half stored); usage is one INCRBY counter a key.

    Each call is bounded by the cache's Redis timeouts; unlike the cache (where Redis away is a miss),
    a call Redis did not answer raises StoreUnavailable: a glossary is not a thing to pretend about.
    """

    def __init__(self, settings: RedisSettings) -> None:
        self.settings = settings
        self._client: Redis = redis_client(settings)

    def _key(self, *parts: str) -> str:
        return self.settings.prefix + ":".join(parts)

    async def _call(self, command: Callable[[], Awaitable[T]]) -> T:
        limit = self.settings.connect_timeout_s + self.settings.timeout_s
        try:
            return await asyncio.wait_for(command(), limit)
        except (TimeoutError, OSError, redis_errors()) as err:
            why = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
            raise StoreUnavailable(f"store redis {redacted(self.settings.url)}: {why}") from None

    async def create_glossary(self, glossary: Glossary) -> None:
        async def write() -> Any:
            async with self._client.pipeline(transaction=True) as multi:
                multi.set(self._key("glossary", glossary.id), glossary.to_json())
                multi.sadd(self._key("glossaries", glossary.owner), glossary.id)
                return await multi.execute()

        await self._call(write)

    async def glossary(self, owner: str, glossary_id: str) -> Glossary | None:
        text = await self._call(lambda: self._client.get(self._key("glossary", glossary_id)))
        found = None if text is None else Glossary.from_json(str(text))
        return found if found is not None and found.owner == owner else None

    async def glossaries(self, owner: str) -> list[Glossary]:
        ids = sorted(await self._call(lambda: self._client.smembers(self._key("glossaries", owner))))
        if not ids:
            return []
        keys = [self._key("glossary", str(i)) for i in ids]
        texts = await self._call(lambda: self._client.mget(keys))
        found = [Glossary.from_json(str(text)) for text in texts if text is not None]
        return sorted((g for g in found if g.owner == owner), key=lambda g: g.created)

    async def delete_glossary(self, owner: str, glossary_id: str) -> bool:
        if await self.glossary(owner, glossary_id) is None:
            return False

        async def delete() -> Any:
            async with self._client.pipeline(transaction=True) as multi:
                multi.delete(self._key("glossary", glossary_id))
                multi.srem(self._key("glossaries", owner), glossary_id)
                return await multi.execute()

        await self._call(delete)
        return True

    async def add_characters(self, owner: str, count: int) -> int:
        return int(await self._call(lambda: self._client.incrby(self._key("usage", owner), count)))

    async def characters(self, owner: str) -> int:
        value = await self._call(lambda: self._client.get(self._key("usage", owner)))
        return 0 if value is None else int(value)

    async def aclose(self) -> None:
        await self._client.aclose()

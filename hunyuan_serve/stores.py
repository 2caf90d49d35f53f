"""Durable per-key state (DeepL glossaries, characters translated): a SQLite file a host, or Redis for all."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from hunyuan_serve.cache import RedisSettings, _client, _redis_errors, redacted
from hunyuan_serve.config import ServeConfig, default_run_dir

if TYPE_CHECKING:
    from redis.asyncio import Redis

T = TypeVar("T")
STORE_FILE = "store.sqlite"
Terms = tuple[tuple[str, str], ...]


class StoreUnavailable(Exception):
    """The store did not answer (a locked or broken file, Redis away or slow); the message says which."""


@dataclass(frozen=True)
class Dictionary:
    """One language pair of a glossary (DeepL's name): base codes as DeepL spells them, lowercase."""

    source: str
    target: str
    entries: Terms


@dataclass(frozen=True)
class Glossary:
    """A stored glossary: its id, the key_id that created it (only that key sees it), name, creation time."""

    id: str
    owner: str
    name: str
    created: str  # ISO 8601 in UTC with milliseconds, as DeepL answers creation_time
    dictionaries: tuple[Dictionary, ...]

    def to_json(self) -> str:
        dictionaries = [[d.source, d.target, [list(e) for e in d.entries]] for d in self.dictionaries]
        body = {"id": self.id, "owner": self.owner, "name": self.name, "created": self.created}
        return json.dumps({**body, "dictionaries": dictionaries}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Glossary:
        data = json.loads(text)
        dictionaries = tuple(
            Dictionary(source, target, tuple((s, t) for s, t in entries))
            for source, target, entries in data["dictionaries"]
        )
        return cls(data["id"], data["owner"], data["name"], data["created"], dictionaries)


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


def open_wal(path: Path, busy_timeout_s: float, schema: tuple[str, ...]) -> sqlite3.Connection:
    """A store's SQLite file in autocommit and WAL mode, schema applied."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    for statement in schema:
        db.execute(statement)
    return db


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
        self._client: Redis = _client(settings)

    def _key(self, *parts: str) -> str:
        return self.settings.prefix + ":".join(parts)

    async def _call(self, command: Callable[[], Awaitable[T]]) -> T:
        limit = self.settings.connect_timeout_s + self.settings.timeout_s
        try:
            return await asyncio.wait_for(command(), limit)
        except (TimeoutError, OSError, _redis_errors()) as err:
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


def store_path(cfg: ServeConfig) -> Path:
    """replica.store_path, else store.sqlite in the run dir (the one `up` and its replicas share)."""
    if cfg.replica.store_path:
        return Path(cfg.replica.store_path)
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir(os.environ)
    return run_dir / STORE_FILE


def _redis_settings(url: str, cfg: ServeConfig) -> RedisSettings:
    """The translation cache's Redis settings, no expiry: glossaries, counts and jobs are kept."""
    rcfg = cfg.replica
    return RedisSettings(
        url,
        rcfg.cache_redis_prefix,
        0,
        rcfg.cache_redis_connect_timeout_s,
        rcfg.cache_redis_timeout_s,
        rcfg.cache_redis_retry_s,
    )


def store_from_config(cfg: ServeConfig) -> Store:
    """Redis when replica.cache_redis_url says the hosts share (with the cache's settings), else SQLite."""
    rcfg = cfg.replica
    if rcfg.cache_redis_url:
        return RedisStore(_redis_settings(rcfg.cache_redis_url, cfg))
    return SqliteStore(store_path(cfg), rcfg.cache_busy_timeout_s)


# -- document jobs (DeepL /v2/document, LibreTranslate /translate_file) ----------------------------

DOCUMENTS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS documents (id TEXT PRIMARY KEY, owner TEXT NOT NULL, key_hash TEXT NOT NULL,"
    " state TEXT NOT NULL, filename TEXT NOT NULL, format TEXT NOT NULL, source TEXT, target TEXT NOT NULL,"
    " created REAL NOT NULL, updated REAL NOT NULL, segments_total INTEGER NOT NULL DEFAULT 0,"
    " segments_done INTEGER NOT NULL DEFAULT 0, segments_cached INTEGER NOT NULL DEFAULT 0,"
    " billed_characters INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0, started REAL,"
    " lease_owner TEXT, lease_until REAL NOT NULL DEFAULT 0, error TEXT, options TEXT, input BLOB NOT NULL,"
    " result BLOB)",
    "CREATE INDEX IF NOT EXISTS documents_state ON documents (state, created)",
)
_JOB_COLUMNS = (
    "id, owner, key_hash, state, filename, format, source, target, created, updated, segments_total,"
    " segments_done, segments_cached, billed_characters, attempts, started, lease_owner, lease_until, error,"
    " options"
)


@dataclass(frozen=True)
class Job:
    """One document job as stored. lease_until: when the replica holding it is taken for dead."""

    id: str
    owner: str  # the key_id of the key that made it ("" without keys): only it reads the job
    key_hash: str  # SHA-256 of the document_key handed out at upload (the key itself is not kept)
    state: str
    filename: str
    format: str
    source: str | None
    target: str
    created: float
    updated: float
    segments_total: int = 0
    segments_done: int = 0
    segments_cached: int = 0
    billed_characters: int = 0
    attempts: int = 0
    started: float | None = None
    lease_owner: str | None = None
    lease_until: float = 0.0
    error: str | None = None
    options: str | None = None  # JSON: what the upload asked for besides the languages (glossary terms)


class Documents(Protocol):
    """Where document jobs live (DocumentJobs: one host's SQLite file; RedisDocumentJobs: every host's);
    every call raises StoreUnavailable when the store does not answer."""

    def add(self, job: Job, data: bytes) -> None: ...

    def get(self, owner: str, job_id: str) -> Job | None: ...

    def claim(self, holder: str, lease_s: float, max_attempts: int) -> tuple[Job, bytes] | None: ...

    def progress(
        self, job_id: str, holder: str, lease_s: float, done: int, total: int, cached: int
    ) -> bool: ...

    def finish(self, job_id: str, holder: str, result: bytes, billed: int) -> bool: ...

    def fail(self, job_id: str, holder: str, error: str) -> bool: ...

    def release(self, job_id: str, holder: str) -> bool: ...

    def result(self, owner: str, job_id: str, remove: bool) -> tuple[str, bytes] | None: ...

    def expire(self, ttl_s: float) -> int: ...

    def close(self) -> None: ...


class DocumentJobs:
    """Document jobs in one SQLite file every replica of the host opens (WAL). Each change is one
    statement, so two replicas never take the same job: a claim is an UPDATE of the oldest claimable
    row that only one of them wins, and every later write names the lease it holds (a replica whose
    lease ran out and was retaken writes nothing more).

    Plain methods (the worker calls them from its own thread; routes through asyncio.to_thread), on one
    connection behind a lock; the clock is passed in so that the unit tests drive leases with a fake one.
    """

    def __init__(
        self, path: str | Path, busy_timeout_s: float = 5.0, clock: Callable[[], float] | None = None
    ) -> None:
        import threading
        import time

        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self.clock = clock or time.time
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = open_wal(self.path, self.busy_timeout_s, DOCUMENTS_SCHEMA)
        return self._db

    def _run(self, query: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        try:
            with self._lock:
                return self._open().execute(query, args)
        except (sqlite3.Error, OSError) as err:
            raise StoreUnavailable(f"document store file {self.path}: {err}") from None

    def add(self, job: Job, data: bytes) -> None:
        """A new queued job with its upload, in one INSERT (nothing is kept of a refused upload)."""
        row = (job.id, job.owner, job.key_hash, job.state, job.filename, job.format, job.source, job.target)
        self._run(
            "INSERT INTO documents (id, owner, key_hash, state, filename, format, source, target, created,"
            " updated, segments_total, options, input) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*row, job.created, job.created, job.segments_total, job.options, data),
        )

    def get(self, owner: str, job_id: str) -> Job | None:
        """The owner's job (another key's is None, as one that never was)."""
        query = f"SELECT {_JOB_COLUMNS} FROM documents WHERE id = ? AND owner = ?"
        return _job(self._run(query, (job_id, owner)).fetchone())

    def claim(self, holder: str, lease_s: float, max_attempts: int) -> tuple[Job, bytes] | None:
        """The oldest queued job, or one whose lease ran out, now held by `holder`; with its upload.

        A job taken max_attempts times already (each time its replica died) becomes an error instead:
        a file that kills every replica that reads it must not go round the replicas for ever.
        """
        now = self.clock()
        self._run(
            "UPDATE documents SET state = 'error', lease_owner = NULL, updated = ?, error = ?"
            " WHERE state = 'translating' AND lease_until < ? AND attempts >= ?",
            (now, f"the job was taken up {max_attempts} times and never finished", now, max_attempts),
        )
        query = (
            "UPDATE documents SET state = 'translating', lease_owner = ?, lease_until = ?, updated = ?,"
            " attempts = attempts + 1, started = COALESCE(started, ?) WHERE id = (SELECT id FROM documents"
            " WHERE state = 'queued' OR (state = 'translating' AND lease_until < ?) ORDER BY created LIMIT 1)"
            f" RETURNING {_JOB_COLUMNS}, input"
        )
        row = self._run(query, (holder, now + lease_s, now, now, now)).fetchone()
        job = _job(row[:-1]) if row is not None else None
        return None if row is None or job is None else (job, bytes(row[-1]))

    def progress(self, job_id: str, holder: str, lease_s: float, done: int, total: int, cached: int) -> bool:
        """Segment counts, and the lease renewed; False when the lease is no longer this holder's."""
        now = self.clock()
        cursor = self._run(
            "UPDATE documents SET segments_done = ?, segments_total = ?, segments_cached = ?,"
            " lease_until = ?, updated = ? WHERE id = ? AND lease_owner = ? AND state = 'translating'",
            (done, total, cached, now + lease_s, now, job_id, holder),
        )
        return cursor.rowcount > 0

    def finish(self, job_id: str, holder: str, result: bytes, billed: int) -> bool:
        cursor = self._run(
            "UPDATE documents SET state = 'done', result = ?, billed_characters = ?, lease_owner = NULL,"
            " segments_done = segments_total, updated = ? WHERE id = ? AND lease_owner = ?",
            (result, billed, self.clock(), job_id, holder),
        )
        return cursor.rowcount > 0

    def fail(self, job_id: str, holder: str, error: str) -> bool:
        cursor = self._run(
            "UPDATE documents SET state = 'error', error = ?, lease_owner = NULL, updated = ?"
            " WHERE id = ? AND lease_owner = ?",
            (error[:1000], self.clock(), job_id, holder),
        )
        return cursor.rowcount > 0

    def release(self, job_id: str, holder: str) -> bool:
        """Back to queued (this replica is stopping): the next replica need not wait out the lease."""
        cursor = self._run(
            "UPDATE documents SET state = 'queued', lease_owner = NULL, lease_until = 0, updated = ?"
            " WHERE id = ? AND lease_owner = ? AND state = 'translating'",
            (self.clock(), job_id, holder),
        )
        return cursor.rowcount > 0

    def result(self, owner: str, job_id: str, remove: bool) -> tuple[str, bytes] | None:
        """A done job's file name and result; remove: in the same statement the job is deleted (DeepL's
        one download), so two downloads racing get it once."""
        verb = "DELETE FROM documents" if remove else "SELECT filename, result FROM documents"
        query = f"{verb} WHERE id = ? AND owner = ? AND state = 'done'"
        row = self._run(query + (" RETURNING filename, result" if remove else ""), (job_id, owner)).fetchone()
        return None if row is None else (str(row[0]), bytes(row[1]))

    def expire(self, ttl_s: float) -> int:
        """Jobs untouched for ttl_s (never downloaded, or an error nobody read) are deleted."""
        return self._run("DELETE FROM documents WHERE updated < ?", (self.clock() - ttl_s,)).rowcount

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _job(row: Any) -> Job | None:
    return None if row is None else Job(*row)


def documents_path(cfg: ServeConfig) -> Path:
    """The document jobs live in the store's SQLite file (store_path, else store.sqlite in the run dir)."""
    return store_path(cfg)


def document_cache_path(cfg: ServeConfig) -> Path:
    """The segments document jobs translated: replica.document_cache_path, else in the run dir."""
    if cfg.replica.document_cache_path:
        return Path(cfg.replica.document_cache_path)
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir(os.environ)
    return run_dir / "document-cache.sqlite"


# Job fields as Redis hash fields (the numbers among them, to read back), in Job's order.
_JOB_FIELDS = tuple(f.strip() for f in _JOB_COLUMNS.split(","))
_JOB_NUMBERS = {"created", "updated", "started", "lease_until"}
_JOB_COUNTS = {"segments_total", "segments_done", "segments_cached", "billed_characters", "attempts"}
# Each change is one script, which Redis runs alone: a claim and a lease check are as atomic as the
# SQLite statements. KEYS[1]: the open jobs (a sorted set by creation), KEYS[2]: every job by last
# change; ARGV[1]: the job key prefix; the clock comes in ARGV (the unit tests' fake one too).
_CLAIM = """
local now, holder, lease, max = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local key = ARGV[1] .. id
  local state = redis.call('HGET', key, 'state')
  local until_ = tonumber(redis.call('HGET', key, 'lease_until') or '0')
  local attempts = tonumber(redis.call('HGET', key, 'attempts') or '0')
  if not state then
    redis.call('ZREM', KEYS[1], id)
  elseif state == 'translating' and until_ < now and attempts >= max then
    redis.call('HSET', key, 'state', 'error', 'updated', now, 'error', ARGV[6])
    redis.call('HDEL', key, 'lease_owner')
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZADD', KEYS[2], now, id)
  elseif state == 'queued' or (state == 'translating' and until_ < now) then
    redis.call('HSET', key, 'state', 'translating', 'lease_owner', holder, 'lease_until', now + lease,
      'updated', now, 'attempts', attempts + 1)
    redis.call('HSETNX', key, 'started', now)
    redis.call('ZADD', KEYS[2], now, id)
    return id
  end
end
return false
"""
# ARGV: prefix, id, holder, now, then field/value pairs; the job changes only while holder holds it.
# A pair whose value is "" removes the field; "=segments_total" copies that field.
_HELD = """
local key = ARGV[1] .. ARGV[2]
if redis.call('HGET', key, 'lease_owner') ~= ARGV[3] or redis.call('HGET', key, 'state') ~= 'translating' then
  return 0
end
for i = 5, #ARGV, 2 do
  local value = ARGV[i + 1]
  if value == '' then redis.call('HDEL', key, ARGV[i])
  elseif string.sub(value, 1, 1) == '=' then
    redis.call('HSET', key, ARGV[i], redis.call('HGET', key, string.sub(value, 2)))
  else redis.call('HSET', key, ARGV[i], value) end
end
redis.call('HSET', key, 'updated', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
local state = redis.call('HGET', key, 'state')
if state == 'done' or state == 'error' then redis.call('ZREM', KEYS[1], ARGV[2]) end
return 1
"""
_RESULT = """
local key = ARGV[1] .. ARGV[2]
if redis.call('HGET', key, 'owner') ~= ARGV[3] or redis.call('HGET', key, 'state') ~= 'done' then
  return false
end
local got = redis.call('HMGET', key, 'filename', 'result')
if ARGV[4] == '1' then
  redis.call('DEL', key)
  redis.call('ZREM', KEYS[1], ARGV[2])
  redis.call('ZREM', KEYS[2], ARGV[2])
end
return got
"""


class RedisDocumentJobs:
    """The same jobs in Redis, when replica.cache_redis_url says the hosts share (a status call may
    land on another host than the upload did): a job is a hash under the prefix, each change one Lua
    script; DocumentJobs' methods and semantics, on redis-py's blocking client (called as DocumentJobs
    is: from the worker's thread, and from routes through asyncio.to_thread)."""

    def __init__(
        self, settings: RedisSettings, timeout_s: float = 5.0, clock: Callable[[], float] | None = None
    ) -> None:
        import time

        import redis

        self.prefix = settings.prefix + "doc:"
        self.clock = clock or time.time
        self.url = settings.url
        # Blobs travel here (an upload, a result): the socket timeout is the store's, not the cache's 0.25 s.
        self._client = redis.Redis.from_url(
            settings.url, socket_connect_timeout=settings.connect_timeout_s, socket_timeout=timeout_s
        )
        self._keys = [settings.prefix + "docs:open", settings.prefix + "docs:changed"]
        self._claim = self._client.register_script(_CLAIM)
        self._held = self._client.register_script(_HELD)
        self._result = self._client.register_script(_RESULT)

    def _call(self, work: Callable[[], T]) -> T:
        try:
            return work()
        except (OSError, _redis_errors()) as err:
            why = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
            raise StoreUnavailable(f"document store redis {redacted(self.url)}: {why}") from None

    def add(self, job: Job, data: bytes) -> None:
        fields: dict[str, str | bytes] = {
            name: str(value)
            for name, value in zip(_JOB_FIELDS, _job_values(job), strict=True)
            if value is not None
        }
        fields["input"] = data

        def write() -> Any:
            with self._client.pipeline(transaction=True) as multi:
                multi.hset(self.prefix + job.id, mapping=fields)  # type: ignore[arg-type]
                multi.zadd(self._keys[0], {job.id: job.created})
                multi.zadd(self._keys[1], {job.id: job.created})
                return multi.execute()

        self._call(write)

    def get(self, owner: str, job_id: str) -> Job | None:
        values = self._call(lambda: self._client.hmget(self.prefix + job_id, list(_JOB_FIELDS)))
        job = _job_from_redis(values)
        return job if job is not None and job.owner == owner else None

    def claim(self, holder: str, lease_s: float, max_attempts: int) -> tuple[Job, bytes] | None:
        why = f"the job was taken up {max_attempts} times and never finished"
        args: list[Any] = [self.prefix, self.clock(), holder, lease_s, max_attempts, why]
        found = self._call(lambda: self._claim(keys=self._keys, args=args))
        if not found:
            return None
        job_id = found.decode() if isinstance(found, bytes) else str(found)
        values: Any = self._call(lambda: self._client.hmget(self.prefix + job_id, [*_JOB_FIELDS, "input"]))
        job = _job_from_redis(values[:-1])
        return None if job is None else (job, bytes(values[-1] or b""))

    def _change(self, job_id: str, holder: str, *pairs: Any) -> bool:
        args = [self.prefix, job_id, holder, self.clock(), *pairs]
        return bool(self._call(lambda: self._held(keys=self._keys, args=args)))

    def progress(self, job_id: str, holder: str, lease_s: float, done: int, total: int, cached: int) -> bool:
        until = self.clock() + lease_s
        pairs = (
            "segments_done",
            done,
            "segments_total",
            total,
            "segments_cached",
            cached,
            "lease_until",
            until,
        )
        return self._change(job_id, holder, *pairs)

    def finish(self, job_id: str, holder: str, result: bytes, billed: int) -> bool:
        pairs = ("result", result, "billed_characters", billed, "segments_done", "=segments_total")
        return self._change(job_id, holder, *pairs, "state", "done", "lease_owner", "")

    def fail(self, job_id: str, holder: str, error: str) -> bool:
        return self._change(job_id, holder, "error", error[:1000], "state", "error", "lease_owner", "")

    def release(self, job_id: str, holder: str) -> bool:
        return self._change(job_id, holder, "state", "queued", "lease_until", 0, "lease_owner", "")

    def result(self, owner: str, job_id: str, remove: bool) -> tuple[str, bytes] | None:
        args = [self.prefix, job_id, owner, "1" if remove else "0"]
        got = self._call(lambda: self._result(keys=self._keys, args=args))
        return None if not got else (bytes(got[0]).decode(), bytes(got[1] or b""))

    def expire(self, ttl_s: float) -> int:
        old = self._call(lambda: self._client.zrangebyscore(self._keys[1], "-inf", self.clock() - ttl_s))
        if not old:
            return 0
        ids = [i.decode() if isinstance(i, bytes) else str(i) for i in old]

        def delete() -> Any:
            with self._client.pipeline(transaction=True) as multi:
                multi.delete(*(self.prefix + i for i in ids))
                multi.zrem(self._keys[0], *ids)
                multi.zrem(self._keys[1], *ids)
                return multi.execute()

        self._call(delete)
        return len(ids)

    def close(self) -> None:
        self._client.close()


def _job_values(job: Job) -> tuple[Any, ...]:
    return tuple(getattr(job, name) for name in _JOB_FIELDS)


def _job_from_redis(values: list[Any]) -> Job | None:
    if values[0] is None:
        return None
    out: list[Any] = []
    for name, raw in zip(_JOB_FIELDS, values, strict=True):
        text = None if raw is None else (raw.decode() if isinstance(raw, bytes) else str(raw))
        if name in _JOB_COUNTS:
            out.append(int(float(text or 0)))
        elif name in _JOB_NUMBERS:
            out.append(None if text is None else float(text))
        else:
            out.append(text)
    lease = out[_JOB_FIELDS.index("lease_until")]
    out[_JOB_FIELDS.index("lease_until")] = 0.0 if lease is None else lease
    return Job(*out)


def documents_from_config(cfg: ServeConfig) -> Documents:
    """Redis when replica.cache_redis_url says the hosts share, else the host's SQLite store file."""
    rcfg = cfg.replica
    if rcfg.cache_redis_url:
        return RedisDocumentJobs(_redis_settings(rcfg.cache_redis_url, cfg), rcfg.cache_busy_timeout_s)
    return DocumentJobs(documents_path(cfg), rcfg.cache_busy_timeout_s)

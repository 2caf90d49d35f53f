"""Translation cache: an in-process LRU before one shared layer, a SQLite file (one host) or Redis (many)."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

from hunyuan_serve.sqlite_in import in_slices

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from hunyuan_serve.config import ReplicaConfig

Layer = Literal["memory", "sqlite", "redis"]
Hit = tuple[str, Layer]
K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")
logger = logging.getLogger(__name__)


class CacheEvents(Protocol):
    """What the cache tells its owner (the replica's metrics): errors by layer and op, a layer up or down."""

    def cache_error(self, layer: str, op: str) -> None: ...

    def cache_layer_up(self, layer: str, up: bool) -> None: ...


class NoEvents:
    """A cache nobody watches."""

    def cache_error(self, layer: str, op: str) -> None:
        pass

    def cache_layer_up(self, layer: str, up: bool) -> None:
        pass


def cache_key(
    model: str,
    source: str,
    target: str,
    text: str,
    sampling: Mapping[str, Any],
    instructions: Mapping[str, Any] | None = None,
    ensemble: int = 0,
) -> str:
    """A stable digest of everything that decides the output: model, languages, text, sampling, the
    prompt's instructions (its family, the glossary terms sent, context, style, preserve_format), and an
    ensemble's candidate count (its entry holds that many candidates, never a plain answer)."""
    return keyed_text(key_prefix(model, source, target, sampling, instructions, ensemble), text)


def key_prefix(
    model: str,
    source: str,
    target: str,
    sampling: Mapping[str, Any],
    instructions: Mapping[str, Any] | None = None,
    ensemble: int = 0,
) -> str:
    """cache_key's JSON payload up to its last field, the text: shared by every text of a batch.

    The payload is json.dumps of the fields with sort_keys, and "text" sorts last among them, so the
    text's field is appended (keyed_text) to the same bytes as one dump of all of them gives.
    """
    fields: dict[str, Any] = {"model": model, "source": source, "target": target, "sampling": dict(sampling)}
    if instructions:
        fields["instructions"] = dict(instructions)
    if ensemble:  # absent for plain requests, so their keys (and caches already filled) stay as they were
        fields["ensemble"] = {"candidates": ensemble}
    return json.dumps(fields, sort_keys=True, ensure_ascii=False)[:-1]


def keyed_text(prefix: str, text: str) -> str:
    """The cache key of `text` under a key_prefix."""
    payload = f"{prefix}, {json.dumps('text')}: {json.dumps(text, ensure_ascii=False)}}}"
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


# The "format" of an entry the cache writes: an entry without it (plain text, from before the entries
# kept how the answer ended and what it counted) is read as a miss, answered again and overwritten.
ANSWER_FORMAT = 2


@dataclass(frozen=True)
class CachedAnswer:
    """What the cache keeps of one answer: its text, why it ended, and the tokens it counted, so that an
    answer from the cache reports what the first one did (a cut-off answer stays "length")."""

    text: str
    finish_reason: str
    prompt_tokens: int
    output_tokens: int


def encode_answer(answer: CachedAnswer) -> str:
    """The entry's value in every layer (memory, SQLite, Redis): one JSON object."""
    fields = {"format": ANSWER_FORMAT, **dataclasses.asdict(answer)}
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def decode_answer(value: str) -> CachedAnswer | None:
    """The answer an entry holds; None for one this format did not write (a miss, never an error)."""
    if not value.startswith("{"):
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") != ANSWER_FORMAT:
        return None
    text, reason = data.get("text"), data.get("finish_reason")
    counts = [data.get("prompt_tokens"), data.get("output_tokens")]
    if not isinstance(text, str) or not isinstance(reason, str):
        return None
    if not all(isinstance(count, int) and not isinstance(count, bool) and count >= 0 for count in counts):
        return None
    return CachedAnswer(text, reason, int(data["prompt_tokens"]), int(data["output_tokens"]))


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


def redacted(url: str) -> str:
    """The URL as logs may show it: a password becomes ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass(frozen=True)
class RedisSettings:
    """The Redis layer's settings (replica.cache_redis_* in the config)."""

    url: str
    prefix: str = "hunyuan-serve:"
    ttl_s: int = 0
    connect_timeout_s: float = 0.25
    timeout_s: float = 0.25
    retry_s: float = 1.0


class RedisCache:
    """The layer every host shares: keys under a prefix, an optional TTL, each call bounded by short timeouts.

    An error is a miss (get) or a dropped write (set), and marks Redis down: for retry_s after it the
    layer is not asked at all, so a Redis that is away costs no request a connection attempt. Then the
    next call tries again on the client's pool, which reconnects by itself. Each change of state is
    logged once, and every call Redis did not serve (failed, or skipped while down) is an error event.
    """

    def __init__(
        self,
        settings: RedisSettings,
        events: CacheEvents | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.events = events or NoEvents()
        self.up: bool | None = None  # None until the first call answers or fails
        self._clock = clock
        self._down_until = 0.0
        self._client: Redis = redis_client(settings)

    async def get(self, key: str) -> str | None:
        return (await self.get_many([key]))[0]

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """One MGET for all the keys; every one a miss when Redis does not answer."""
        names = [self.settings.prefix + key for key in keys]
        values = await self._call("get", lambda: self._client.mget(names))
        if values is None:
            return [None] * len(keys)
        return [None if value is None else str(value) for value in values]

    async def set(self, key: str, value: str) -> None:
        await self.set_many({key: value})

    async def set_many(self, items: Mapping[str, str]) -> None:
        """One pipelined round trip for all the items (not a transaction: each SET stands alone)."""
        ttl = self.settings.ttl_s or None

        async def send() -> list[Any]:
            async with self._client.pipeline(transaction=False) as pipe:
                for key, value in items.items():
                    pipe.set(self.settings.prefix + key, value, ex=ttl)
                return list(await pipe.execute())

        await self._call("set", send)

    async def _call(self, op: str, command: Callable[[], Awaitable[T]]) -> T | None:
        if self.up is False and self._clock() < self._down_until:
            self.events.cache_error("redis", op)
            return None
        limit = self.settings.connect_timeout_s + self.settings.timeout_s
        try:
            result = await asyncio.wait_for(command(), limit)
        except (TimeoutError, OSError, redis_errors()) as err:
            self._down(op, err)
            return None
        if self.up is not True:
            logger.info("redis cache %s answers", redacted(self.settings.url))
            self.up = True
            self.events.cache_layer_up("redis", True)
        return result

    def _down(self, op: str, err: BaseException) -> None:
        self._down_until = self._clock() + self.settings.retry_s
        self.events.cache_error("redis", op)
        if self.up is not False:
            why = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
            logger.warning(
                "redis cache %s unavailable (%s): going on without it, trying again every %gs",
                redacted(self.settings.url),
                why,
                self.settings.retry_s,
            )
            self.up = False
            self.events.cache_layer_up("redis", False)

    async def aclose(self) -> None:
        await self._client.aclose()


def redis_client(settings: RedisSettings) -> Redis:
    """The asyncio Redis client of the cache and of the per-key store, bounded by their settings."""
    from redis.asyncio import Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    # One retry, at once, on a fresh connection: a connection the pool kept from before a Redis restart
    # fails its first use. No more: a failed call is a miss now, and RedisCache bounds the whole call.
    return Redis.from_url(
        settings.url,
        socket_connect_timeout=settings.connect_timeout_s,
        socket_timeout=settings.timeout_s,
        retry=Retry(NoBackoff(), 1, (RedisConnectionError,)),
        decode_responses=True,
    )


def redis_errors() -> type[Exception]:
    # Imported when needed: redis.asyncio takes most of a second to import, and most replicas never use it.
    from redis.exceptions import RedisError

    return RedisError


class TranslationCache:
    """Memory first, then the one shared layer (a SQLite file or Redis); a shared hit is copied into memory.

    The file is used on one I/O thread of its own: SQLite waits for another replica's write lock
    (up to busy_timeout_s) and fsyncs at checkpoints, and neither may stall the event loop. Redis is
    asynchronous and bounded by its own short timeouts. Writes are not awaited: the answer is in
    memory already, and a lost write only costs a miss.
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

    @classmethod
    def from_config(cls, cfg: ReplicaConfig, events: CacheEvents | None = None) -> TranslationCache:
        redis = None
        if cfg.cache_redis_url:
            redis = RedisSettings(
                cfg.cache_redis_url,
                cfg.cache_redis_prefix,
                cfg.cache_redis_ttl_s,
                cfg.cache_redis_connect_timeout_s,
                cfg.cache_redis_timeout_s,
                cfg.cache_redis_retry_s,
            )
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
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(self._io, self.file.get_many, keys)
        except sqlite3.Error as err:  # a broken or locked file is a miss, not a failed request
            logger.warning("cache read failed: %s", err)
            self.events.cache_error("sqlite", "get")
            return [None] * len(keys)
        return [None if key not in found else (found[key], "sqlite") for key in keys]

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
        return self._io.submit(self._write, self.file, dict(items))

    def _write(self, file: SqliteCache, items: dict[str, str]) -> None:
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

"""The translation cache's many-host shared layer: Redis, and the client the per-key store shares."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from hunyuan_serve.cache.events import CacheEvents, NoEvents

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from hunyuan_serve.config import ReplicaConfig

T = TypeVar("T")
logger = logging.getLogger(__name__)


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
    # rediss:// only: the CA verifying Redis's certificate (None: the system's), the client's own pair.
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None

    @classmethod
    def of_replica(cls, cfg: ReplicaConfig, ttl_s: int) -> RedisSettings:
        """The one Redis link of a replica (cache, per-key store, document jobs): replica.cache_redis_*."""
        assert cfg.cache_redis_url, "of_replica needs replica.cache_redis_url"
        return cls(
            cfg.cache_redis_url,
            cfg.cache_redis_prefix,
            ttl_s,
            cfg.cache_redis_connect_timeout_s,
            cfg.cache_redis_timeout_s,
            cfg.cache_redis_retry_s,
            cfg.cache_redis_tls_ca,
            cfg.cache_redis_tls_cert,
            cfg.cache_redis_tls_key,
        )

    def tls_options(self) -> dict[str, Any]:
        """redis-py's ssl_* arguments for a rediss:// URL: the server's certificate and name always
        verified (a man in the middle would read every text and glossary), a client pair if set."""
        if not self.url.startswith("rediss://"):
            return {}
        options: dict[str, Any] = {"ssl_cert_reqs": "required", "ssl_check_hostname": True}
        if self.tls_ca:
            options["ssl_ca_certs"] = self.tls_ca
        if self.tls_cert:
            options["ssl_certfile"], options["ssl_keyfile"] = self.tls_cert, self.tls_key
        return options


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
        **settings.tls_options(),
    )


def redis_errors() -> type[Exception]:
    # Imported when needed: redis.asyncio takes most of a second to import, and most replicas never use it.
    from redis.exceptions import RedisError

    return RedisError

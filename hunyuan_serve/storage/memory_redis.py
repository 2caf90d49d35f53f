"""Translation memories in Redis, under the cache's prefix, for replicas on several hosts."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from hunyuan_serve.cache.redis_layer import RedisSettings, redacted, redis_client, redis_errors
from hunyuan_serve.storage.backend import StoreUnavailable
from hunyuan_serve.storage.memory import Hit, MemoryFull, Origin, Unit

if TYPE_CHECKING:
    from redis.asyncio import Redis

T = TypeVar("T")
# An import of many units is sent in pipelines of this many commands, each one round trip.
_BATCH = 5000


class RedisMemory:
    """Per owner: a hash per language pair (source -> [target, origin]), the set of its pairs, a hash of
    its imports (provenance) and a version counter. An import is one MULTI (nothing half stored); its
    size bound is read just before, so two imports at the same moment may pass it together."""

    def __init__(self, settings: RedisSettings, bulk_timeout_s: float = 30.0) -> None:
        self.settings = settings
        self.bulk_timeout_s = bulk_timeout_s
        self._client: Redis = redis_client(settings)
        # Imports, exports and deletes read or write a whole memory: a read of their answer may take
        # longer than the lookups' short socket timeout, so they have a client of their own.
        self._bulk: Redis = redis_client(dataclasses.replace(settings, timeout_s=bulk_timeout_s))

    def _key(self, *parts: str) -> str:
        return self.settings.prefix + "memory:" + ":".join(parts)

    async def _call(self, command: Callable[[Redis], Awaitable[T]], slow: bool = False) -> T:
        timeout_s = self.bulk_timeout_s if slow else self.settings.timeout_s
        try:
            client = self._bulk if slow else self._client
            return await asyncio.wait_for(command(client), self.settings.connect_timeout_s + timeout_s)
        except (TimeoutError, OSError, redis_errors()) as err:
            why = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
            raise StoreUnavailable(f"store redis {redacted(self.settings.url)}: {why}") from None

    async def _pair_keys(self, owner: str) -> list[tuple[str, str]]:
        found = await self._call(lambda r: r.smembers(self._key("pairs", owner)))
        return sorted(tuple(str(each).split("\t", 1)) for each in found)  # type: ignore[misc]

    async def _new_units(self, owner: str, units: list[Unit]) -> int:
        """How many of the units are not stored yet (the others replace a stored one)."""
        new = 0
        for start in range(0, len(units), _BATCH):
            chunk = units[start : start + _BATCH]

            async def ask(r: Redis, chunk: list[Unit] = chunk) -> list[Any]:
                async with r.pipeline(transaction=False) as pipe:
                    for u in chunk:
                        pipe.hexists(self._key("units", owner, u.src, u.tgt), u.source)
                    return await pipe.execute()

            new += sum(not held for held in await self._call(ask, slow=True))
        return new

    async def _count(self, owner: str) -> int:
        pairs = await self._pair_keys(owner)

        async def lengths(r: Redis) -> list[Any]:
            async with r.pipeline(transaction=False) as pipe:
                for src, tgt in pairs:
                    pipe.hlen(self._key("units", owner, src, tgt))
                return await pipe.execute()

        return sum(int(n) for n in await self._call(lengths)) if pairs else 0

    async def add(self, origin: Origin, units: list[Unit], max_units: int) -> int:
        owner = origin.owner
        latest = {(u.src, u.tgt, u.source): u for u in units}  # a file's later unit wins, as in SQLite
        unique = list(latest.values())
        total = await self._count(owner) + await self._new_units(owner, unique)
        if total > max_units:
            raise MemoryFull(
                f"the memory would hold {total} units; the limit is {max_units} "
                "(replica.memory_max_units): nothing was imported"
            )
        by_pair: dict[tuple[str, str], dict[Any, Any]] = {}
        for u in unique:
            value = json.dumps([u.target, origin.id], ensure_ascii=False)
            by_pair.setdefault((u.src, u.tgt), {})[u.source] = value

        async def write(r: Redis) -> Any:
            async with r.pipeline(transaction=True) as multi:
                for (src, tgt), mapping in by_pair.items():
                    multi.hset(self._key("units", owner, src, tgt), mapping=mapping)
                    multi.sadd(self._key("pairs", owner), f"{src}\t{tgt}")
                multi.hset(self._key("origins", owner), origin.id, origin.to_json())
                multi.rpush(self._key("order", owner), origin.id)  # the imports' order, for listing
                multi.incr(self._key("version", owner))
                return await multi.execute()

        await self._call(write, slow=True)
        return total

    async def origins(self, owner: str) -> list[Origin]:
        ids = await self._call(lambda r: r.lrange(self._key("order", owner), 0, -1))
        if not ids:
            return []
        found = await self._call(lambda r: r.hmget(self._key("origins", owner), ids))
        return [Origin.from_json(str(each)) for each in found if each is not None]

    async def delete(self, owner: str, origin_id: str | None) -> int:
        pairs = await self._pair_keys(owner)
        known = await self._call(lambda r: r.hkeys(self._key("origins", owner)))
        if origin_id is not None and origin_id not in {str(each) for each in known}:
            return -1
        if origin_id is None and not pairs and not known:
            return -1
        gone: dict[str, list[str]] = {}
        for src, tgt in pairs:
            key = self._key("units", owner, src, tgt)
            held = await self._hgetall(key)
            gone[key] = [
                str(s) for s, v in held.items() if origin_id is None or json.loads(v)[1] == origin_id
            ]

        async def remove(r: Redis) -> Any:
            async with r.pipeline(transaction=True) as multi:
                for key, sources in gone.items():
                    if sources:
                        multi.hdel(key, *sources)
                if origin_id is None:
                    multi.delete(
                        self._key("origins", owner), self._key("pairs", owner), self._key("order", owner)
                    )
                else:
                    multi.hdel(self._key("origins", owner), origin_id)
                    multi.lrem(self._key("order", owner), 0, origin_id)
                multi.incr(self._key("version", owner))
                return await multi.execute()

        await self._call(remove, slow=True)
        return sum(len(sources) for sources in gone.values())

    async def units(self, owner: str) -> list[Unit]:
        found: list[Unit] = []
        for src, tgt in await self._pair_keys(owner):
            for source, target in await self.pair_units(owner, src, tgt):
                found.append(Unit(src, tgt, source, target))
        return sorted(found, key=lambda u: (u.src, u.tgt, u.source))

    async def exact(self, owners: list[str], src: str, tgt: str, texts: list[str]) -> dict[str, Hit]:
        wanted = list(dict.fromkeys(texts))

        async def read(r: Redis) -> list[Any]:
            async with r.pipeline(transaction=False) as pipe:
                for owner in owners:
                    pipe.hmget(self._key("units", owner, src, tgt), wanted)
                return await pipe.execute()

        found: dict[str, Hit] = {}
        for owner, values in zip(owners, await self._call(read), strict=True):
            for text, value in zip(wanted, values, strict=True):
                if value is not None and text not in found:
                    target, origin = json.loads(value)
                    found[text] = Hit(target, owner, origin)
        return found

    async def pair_units(self, owner: str, src: str, tgt: str) -> list[tuple[str, str]]:
        held = await self._hgetall(self._key("units", owner, src, tgt))
        return [(str(source), json.loads(value)[0]) for source, value in held.items()]

    async def _hgetall(self, key: str) -> dict[str, str]:
        async def read(r: Redis) -> dict[str, str]:
            return {str(k): str(v) for k, v in (await r.hgetall(key)).items()}

        return await self._call(read, slow=True)

    async def versions(self, owners: list[str]) -> tuple[int, ...]:
        keys = [self._key("version", owner) for owner in owners]
        values = await self._call(lambda r: r.mget(keys))
        return tuple(int(v) if v is not None else 0 for v in values)

    async def pairs(self, owners: list[str]) -> set[tuple[str, str]]:
        found: set[tuple[str, str]] = set()
        for owner in owners:
            found.update(await self._pair_keys(owner))
        return found

    async def aclose(self) -> None:
        await self._client.aclose()
        await self._bulk.aclose()

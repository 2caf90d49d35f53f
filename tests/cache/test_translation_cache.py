"""The translation cache: key, LRU bound, and the SQLite file two caches share."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from hunyuan_serve.cache.key import cache_key
from hunyuan_serve.cache.layers import TranslationCache
from hunyuan_serve.cache.memory import LruCache
from hunyuan_serve.cache.sqlite import SqliteCache
from hunyuan_serve.families import HUNYUAN_MT, sampling_defaults

SAMPLING = {**sampling_defaults(HUNYUAN_MT).as_dict(), "max_tokens": 64}


def _count_reads(file: SqliteCache) -> list[int]:
    """The keys of each read the file is asked from now on, one entry a read."""
    hops: list[int] = []
    lookup = file.get_many

    def counted(wanted: Sequence[str]) -> dict[str, str]:
        hops.append(len(wanted))
        return lookup(wanted)

    file.get_many = counted  # type: ignore[method-assign]
    return hops


def test_key_depends_on_every_part() -> None:
    base = cache_key("m", "en", "zh", "Hi", SAMPLING)
    assert base == cache_key("m", "en", "zh", "Hi", dict(reversed(list(SAMPLING.items()))))
    assert base != cache_key("m2", "en", "zh", "Hi", SAMPLING)
    assert base != cache_key("m", "en", "ja", "Hi", SAMPLING)
    assert base != cache_key("m", "fr", "zh", "Hi", SAMPLING)
    assert base != cache_key("m", "en", "zh", "Hi ", SAMPLING)
    assert base != cache_key("m", "en", "zh", "Hi", {**SAMPLING, "temperature": 0.0})


def test_lru_evicts_least_recently_used() -> None:
    lru = LruCache(2)
    lru.put("a", "1")
    lru.put("b", "2")
    assert lru.get("a") == "1"
    lru.put("c", "3")
    assert lru.get("b") is None
    assert (lru.get("a"), lru.get("c"), len(lru)) == ("1", "3", 2)


def test_lru_of_zero_stores_nothing() -> None:
    lru = LruCache(0)
    lru.put("a", "1")
    assert lru.get("a") is None


async def test_sqlite_file_is_shared_between_caches(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "translations.sqlite"
    first = TranslationCache(10, path)
    second = TranslationCache(10, path)
    try:
        assert first.file is not None and first.file.journal_mode() == "wal"
        first.put("k", "你好")
        assert await first.get("k") == ("你好", "memory")  # at once, before the file write lands
        first.close()  # waits for the queued write
        assert await second.get("k") == ("你好", "sqlite")
        assert await second.get("k") == ("你好", "memory")
        assert await second.get("missing") is None
    finally:
        first.close()
        second.close()


async def test_a_write_waiting_for_another_writers_lock_does_not_stall_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "translations.sqlite"
    cache = TranslationCache(10, path, busy_timeout_s=2.0)
    blocker = sqlite3.connect(str(path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another replica holding the write lock
    try:
        write = cache.put("k", "v")
        # Had the write run on the event loop, put() would have returned only once it was over.
        assert write is not None and not write.done()
        assert await cache.get("k") == ("v", "memory")  # the loop serves others while the write waits
        assert not write.done()
        await asyncio.wrap_future(write)  # it waits out busy_timeout_s on the cache's thread, then gives up
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        cache.close()
    with sqlite3.connect(str(path)) as db:
        assert db.execute("SELECT count(*) FROM translations").fetchone()[0] == 0  # lost: a miss later


async def test_a_batch_is_looked_up_in_one_hop_and_written_in_one_transaction(tmp_path: Path) -> None:
    path = tmp_path / "translations.sqlite"
    writer, reader = TranslationCache(10, path), TranslationCache(2000, path)
    keys = [f"k{n}" for n in range(1200)]  # more than one lookup slice
    try:
        assert writer.file is not None and reader.file is not None
        write = writer.put_many({key: f"v{key}" for key in keys[:1100]})
        assert write is not None
        await asyncio.wrap_future(write)
        reader.memory.put("k5", "from memory")
        hops = _count_reads(reader.file)
        hits = await reader.get_many(["k5", *keys[1000:1200], "k0"])
        assert hops == [201]  # every key memory did not hold, in one trip to the I/O thread
        assert hits[0] == ("from memory", "memory")
        assert hits[1:101] == [(f"vk{n}", "sqlite") for n in range(1000, 1100)]
        assert hits[101:201] == [None] * 100 and hits[201] == ("vk0", "sqlite")
        assert await reader.get("k1000") == ("vk1000", "memory")  # a shared hit is kept in memory
    finally:
        writer.close()
        reader.close()
    with sqlite3.connect(str(path)) as db:
        created = {row[0] for row in db.execute("SELECT created FROM translations")}
    assert len(created) == 1  # one batch, one stamp: one INSERT statement's transaction


async def test_a_batch_write_refused_by_a_locked_file_leaves_the_connection_usable(tmp_path: Path) -> None:
    path = tmp_path / "translations.sqlite"
    cache = TranslationCache(10, path, busy_timeout_s=0.1)
    blocker = sqlite3.connect(str(path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        lost = cache.put_many({"a": "1", "b": "2"})
        assert lost is not None
        await asyncio.wrap_future(lost)  # gave up after busy_timeout_s
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    try:
        kept = cache.put_many({"c": "3"})
        assert kept is not None
        await asyncio.wrap_future(kept)
        assert cache.file is not None and cache.file.get_many(["a", "b", "c"]) == {"c": "3"}
    finally:
        cache.close()


async def test_lookups_that_come_while_a_read_runs_are_read_together(tmp_path: Path) -> None:
    # A burst: a thousand requests' lookups at once. One queue job each would put a person's lookup
    # behind all of them on the file's one thread; they are read in a few jobs instead.
    path = tmp_path / "translations.sqlite"
    cache = TranslationCache(10, path)
    try:
        assert cache.file is not None
        write = cache.put_many({f"k{n}": f"v{n}" for n in range(0, 1000, 2)})
        assert write is not None
        await asyncio.wrap_future(write)
        cache.memory = LruCache(0)  # every lookup goes to the file
        hops = _count_reads(cache.file)
        hits = await asyncio.gather(*(cache.get(f"k{n}") for n in range(1000)))
        assert hits == [(f"v{n}", "sqlite") if n % 2 == 0 else None for n in range(1000)]
        assert sum(hops) == 1000 and len(hops) <= 2  # the first alone, the rest that came meanwhile
        before = len(hops)
        assert await cache.get("k2") == ("v2", "sqlite") and len(hops) == before + 1  # later: read again
    finally:
        cache.close()


async def test_puts_not_yet_written_are_joined_in_one_write(tmp_path: Path) -> None:
    path = tmp_path / "translations.sqlite"
    cache = TranslationCache(10, path, busy_timeout_s=2.0)
    blocker = sqlite3.connect(str(path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # the first write waits for the lock: the others queue behind it
    try:
        first = cache.put("k0", "v0")
        while cache._next_write is not None:  # the thread took the first put into its write
            await asyncio.sleep(0.01)
        later = [cache.put(f"k{n}", f"v{n}") for n in range(1, 100)]
        assert len({id(f) for f in later}) == 1 and later[0] is not first  # one write for the 99 puts
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert later[0] is not None
    await asyncio.wrap_future(later[0])
    cache.close()
    with sqlite3.connect(str(path)) as db:
        rows = db.execute("SELECT key, created FROM translations").fetchall()
    assert {key for key, _ in rows} == {f"k{n}" for n in range(100)}
    assert len({created for key, created in rows if key != "k0"}) == 1  # one transaction's stamp

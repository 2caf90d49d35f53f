"""Translation memories on a real SQLite file and a real redis-server, as two replicas see them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hunyuan_serve.cache.redis_layer import RedisSettings
from hunyuan_serve.memory.ops import import_file, origin_json
from hunyuan_serve.memory.tmx import MemoryFileInvalid
from hunyuan_serve.storage.memory import SHARED, Hit, MemoryFull, MemoryStore, Origin, Unit
from hunyuan_serve.storage.memory_redis import RedisMemory
from hunyuan_serve.storage.memory_sqlite import SqliteMemory
from tests.support.redis_server import RedisServer

TSV = "Save\t保存\nLoad\t载入\n".encode()


@pytest.fixture(params=["sqlite", "redis"])
async def stores(
    request: pytest.FixtureRequest, tmp_path: Path, redis: RedisServer
) -> AsyncIterator[tuple[MemoryStore, MemoryStore]]:
    """Two stores on the same backend, as two replicas (or hosts) see it."""
    if request.param == "sqlite":
        path = tmp_path / "s.sqlite"
        pair: tuple[MemoryStore, MemoryStore] = (SqliteMemory(path), SqliteMemory(path))
    else:
        settings = RedisSettings(redis.url, f"t{tmp_path.name}:", 0, 1.0, 1.0)
        pair = (RedisMemory(settings), RedisMemory(settings))
    yield pair
    for store in pair:
        await store.aclose()


def _origin(owner: str, units: int, name: str = "ui.tmx") -> Origin:
    return Origin(f"id-{owner}-{name}", owner, name, "2026-12-07T00:00:00Z", "tester", units)


async def test_an_import_is_seen_by_the_other_replica_and_the_callers_own_memory_wins(
    stores: tuple[MemoryStore, MemoryStore],
) -> None:
    one, two = stores
    assert await two.versions(["key-a", SHARED]) == (0, 0)
    await one.add(
        _origin(SHARED, 2), [Unit("en", "zh", "Save", "保存"), Unit("en", "zh", "Load", "载入")], 10
    )
    await one.add(_origin("key-a", 1), [Unit("en", "zh", "Save", "存储")], 10)
    found = await two.exact(["key-a", SHARED], "en", "zh", ["Save", "Load", "Quit", "Save"])
    assert found == {
        "Save": Hit("存储", "key-a", "id-key-a-ui.tmx"),
        "Load": Hit("载入", SHARED, f"id-{SHARED}-ui.tmx"),
    }
    assert (await two.exact(["key-b", SHARED], "en", "zh", ["Save"]))["Save"].target == "保存"
    assert await two.exact(["key-a", SHARED], "en", "de", ["Save"]) == {}  # another pair
    assert all(v > 0 for v in await two.versions(["key-a", SHARED]))
    assert await two.pairs(["key-b", SHARED]) == {("en", "zh")}
    assert sorted(await two.pair_units(SHARED, "en", "zh")) == [("Load", "载入"), ("Save", "保存")]


async def test_the_size_bound_refuses_a_whole_import_and_keeps_what_was_there(
    stores: tuple[MemoryStore, MemoryStore],
) -> None:
    one, two = stores
    await one.add(_origin("k", 2), [Unit("en", "de", "a", "A"), Unit("en", "de", "b", "B")], 3)
    before = await two.versions(["k"])
    with pytest.raises(MemoryFull, match="would hold 4 units; the limit is 3"):
        await two.add(
            _origin("k", 2, "more.tmx"), [Unit("en", "de", "c", "C"), Unit("en", "de", "d", "D")], 3
        )
    assert await one.versions(["k"]) == before
    assert [o.name for o in await one.origins("k")] == ["ui.tmx"]
    assert len(await one.units("k")) == 2
    # Replacing a unit does not grow the memory: within the bound.
    await two.add(_origin("k", 1, "fix.tmx"), [Unit("en", "de", "a", "A2")], 2)
    assert (await one.exact(["k"], "en", "de", ["a"]))["a"].target == "A2"


async def test_an_import_is_deleted_alone_or_the_whole_memory(
    stores: tuple[MemoryStore, MemoryStore],
) -> None:
    one, two = stores
    first = await import_file(one, "k", "ui.tsv", "alice", TSV, None, ("en", "zh"), 100)
    second = await import_file(one, "k", "more.csv", "bob", "Quit,退出\n".encode(), None, ("en", "zh"), 100)
    assert [(o.name, o.who, o.units) for o in await two.origins("k")] == [
        ("ui.tsv", "alice", 2),
        ("more.csv", "bob", 1),
    ]
    assert origin_json(first)["file"] == "ui.tsv" and first.created.endswith("Z")
    assert await two.delete("k", first.id) == 2
    assert await one.exact(["k"], "en", "zh", ["Save", "Quit"]) == {"Quit": Hit("退出", "k", second.id)}
    assert await two.delete("k", first.id) == -1  # gone already
    assert await two.delete("k", None) == 1
    assert await one.units("k") == [] and await one.origins("k") == []
    assert await two.delete("k", None) == -1


async def test_a_malformed_file_stores_nothing(stores: tuple[MemoryStore, MemoryStore]) -> None:
    one, _ = stores
    with pytest.raises(MemoryFileInvalid, match="TSV line 2"):
        await import_file(one, "k", "ui.tsv", "alice", b"a\tb\nc\n", None, ("en", "zh"), 100)
    assert await one.versions(["k"]) == (0,)
    assert await one.origins("k") == []

"""The replica's memory lookups under a burst (real SQLite store): every request that finds a version
stale, or an index to build, at once shares one read of the store instead of queueing its own."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.replica.memories.recall import Recall, owners_of
from hunyuan_serve.storage.memory import SHARED, Origin, Unit
from hunyuan_serve.storage.memory_sqlite import SqliteMemory


async def test_a_bursts_lookups_read_each_version_and_build_each_index_once(tmp_path: Path) -> None:
    store = SqliteMemory(tmp_path / "store.sqlite")
    origin = Origin("o1", SHARED, "ui.tsv", "2026-12-07T00:00:00Z", "test", 2)
    units = [Unit("en", "zh", "Batch count", "总批次数"), Unit("en", "zh", "Sampling steps", "迭代步数")]
    await store.add(origin, units, 100)
    asked = {"versions": 0, "units": 0}
    versions, pair_units = store.versions, store.pair_units

    async def counted_versions(owners: list[str]) -> tuple[int, ...]:
        asked["versions"] += 1
        return await versions(owners)

    async def counted_units(owner: str, src: str, tgt: str) -> list[tuple[str, str]]:
        asked["units"] += 1
        return await pair_units(owner, src, tgt)

    store.versions = counted_versions  # type: ignore[method-assign]
    store.pair_units = counted_units  # type: ignore[method-assign]
    recall = Recall(store, ReplicaConfig(), None)
    try:
        found = await asyncio.gather(*(recall.indexes(owners_of("key-a"), ("en", "zh")) for _ in range(200)))
        assert all(len(indexes) == 1 and indexes[0].exact["Batch count"] == "总批次数" for indexes in found)
        # Two owners (the key's, empty, and the shared one): a read of each, not 200 reads of both.
        assert asked == {"versions": 2, "units": 1}
        await recall.indexes(owners_of("key-a"), ("en", "zh"))
        assert asked == {"versions": 2, "units": 1}  # fresh for memory_refresh_s, the index kept
    finally:
        await store.aclose()

"""The memory store alone: how long 100,000 TMX units take to import, and what an exact lookup adds."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.percentiles import nearest_rank
from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.memory.ops import import_file
from hunyuan_serve.memory.tmx import write_tmx
from hunyuan_serve.replica.memories.recall import Recall, owners_of
from hunyuan_serve.storage.memory import SHARED, Unit
from hunyuan_serve.storage.memory_sqlite import SqliteMemory

IMPORT_UNITS = 100_000
LOOKUPS = 10_000


def synthetic_units(count: int) -> list[Unit]:
    """UI-like strings, each distinct: a WebUI-sized sentence and a number."""
    return [
        Unit("en", "zh", f"Apply the setting number {n} to every image", f"将第 {n} 项设置应用到每张图片")
        for n in range(count)
    ]


async def _measure(work: Path, count: int, lookups: int) -> dict[str, Any]:
    data = write_tmx(synthetic_units(count))
    store = SqliteMemory(work / "store.sqlite")
    try:
        started = time.perf_counter()
        origin = await import_file(store, SHARED, "bench.tmx", "bench", data, None, (None, None), count)
        import_s = time.perf_counter() - started
        recall, owners = Recall(store, ReplicaConfig(), None), owners_of("some-key")
        started = time.perf_counter()
        await recall.indexes(owners, ("en", "zh"))  # the replica's first lookup of the pair builds its index
        index_s = time.perf_counter() - started
        took: list[float] = []
        for n in range(lookups):
            text = f"Apply the setting number {(n * 7919) % count} to every image"
            began = time.perf_counter()
            # What MemoryTranslator does before an exact answer (replica.memory_refresh_s's reads included).
            found = recall.exact(await recall.indexes(owners, ("en", "zh")), [text])
            took.append((time.perf_counter() - began) * 1000)
            assert text in found
    finally:
        await store.aclose()
    return {
        "units": origin.units,
        "tmx_mb": round(len(data) / 1e6, 1),
        "import_s": round(import_s, 2),
        "index_s": round(index_s, 2),
        "lookups": lookups,
        "lookup_p50_ms": round(statistics.median(took), 3),
        "lookup_p99_ms": round(nearest_rank(took, 0.99), 3),
    }


def measure(count: int = IMPORT_UNITS, lookups: int = LOOKUPS) -> dict[str, Any]:
    """Import `count` units from one TMX file into a fresh store file, then `lookups` exact lookups."""
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        return asyncio.run(_measure(Path(tmp), count, lookups))

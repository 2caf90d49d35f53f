"""The replica's lookups in the translation memories: exact answers, and close matches from an index."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.memory.similar import FuzzyIndex, Match
from hunyuan_serve.replica.memory_use import EXACT, FUZZY, MISS
from hunyuan_serve.storage.memory import SHARED, Hit, MemoryStore

# Fuzzy indexes kept (one per memory and language pair asked for); the least recently used goes first.
INDEXES_KEPT = 32


def owners_of(key_id: str | None) -> list[str]:
    """Whose memories a caller's texts are looked up in, in order: the key's own, then the deployment's."""
    return [key_id or "", SHARED]


class Recall:
    """Exact lookups go to the store each time (one query a batch: what another replica imported is
    seen at once); close matches come from an index of the pair's units, rebuilt when the memory's
    version in the store moved."""

    def __init__(self, store: MemoryStore, cfg: ReplicaConfig, registry: CollectorRegistry | None) -> None:
        self.store = store
        self.cfg = cfg
        self.lookups = Counter(
            "hunyuan_memory_lookups",
            "Texts looked up in the translation memories, by result: exact (answered from the memory, "
            "no engine call), fuzzy (close matches guided the model), miss.",
            ["result"],
            registry=registry,
        )
        for result in (EXACT, FUZZY, MISS):
            self.lookups.labels(result)
        self._indexes: collections.OrderedDict[tuple[str, str, str], tuple[int, FuzzyIndex]] = (
            collections.OrderedDict()
        )

    @property
    def enabled(self) -> bool:
        return self.cfg.memory

    async def versions(self, owners: list[str]) -> tuple[int, ...]:
        return await self.store.versions(owners)

    async def exact(self, owners: list[str], src: str, tgt: str, texts: Sequence[str]) -> dict[str, Hit]:
        return await self.store.exact(owners, src, tgt, list(texts))

    async def fuzzy(
        self, owners: list[str], versions: tuple[int, ...], pair: tuple[str, str], texts: Sequence[str]
    ) -> list[list[Match]]:
        """Each text's best matches over the owners' memories, best first, at most memory_fuzzy_matches."""
        limit, threshold = self.cfg.memory_fuzzy_matches, self.cfg.memory_fuzzy_threshold
        if limit <= 0 or not texts:
            return [[] for _ in texts]
        indexes = [
            await self._index(owner, version, pair)
            for owner, version in zip(owners, versions, strict=True)
            if version
        ]

        def search() -> list[list[Match]]:
            found = []
            for text in texts:
                matches = [m for index in indexes for m in index.best(text, threshold, limit)]
                found.append(sorted(matches, key=lambda m: -m.score)[:limit])
            return found

        # Off the event loop: scoring a text against a large memory takes milliseconds of CPU.
        return await asyncio.to_thread(search)

    async def _index(self, owner: str, version: int, pair: tuple[str, str]) -> FuzzyIndex:
        key = (owner, *pair)
        kept = self._indexes.get(key)
        if kept is not None and kept[0] == version:
            self._indexes.move_to_end(key)
            return kept[1]
        units = await self.store.pair_units(owner, *pair)
        index = await asyncio.to_thread(FuzzyIndex, units)
        self._indexes[key] = (version, index)
        while len(self._indexes) > INDEXES_KEPT:
            self._indexes.popitem(last=False)
        return index

    def count(self, results: Sequence[str]) -> None:
        for result in results:
            self.lookups.labels(result).inc()

"""The replica's lookups in the translation memories: an index per memory and language pair, in process."""

from __future__ import annotations

import asyncio
import collections
import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.memory.similar import FuzzyIndex, Match
from hunyuan_serve.replica.memories.use import EXACT, FUZZY, MISS
from hunyuan_serve.replica.single_flight import SingleFlight
from hunyuan_serve.storage.memory import SHARED, MemoryStore

# Indexes kept (one per memory and language pair asked for); the least recently used goes first.
INDEXES_KEPT = 32


def owners_of(key_id: str | None) -> list[str]:
    """Whose memories a caller's texts are looked up in, in order: the key's own, then the deployment's."""
    return [key_id or "", SHARED]


@dataclass(frozen=True)
class PairIndex:
    """One memory's units of one language pair: exact sources, and the encoded ones for close matches."""

    exact: dict[str, str]
    fuzzy: FuzzyIndex

    @classmethod
    def of(cls, units: Sequence[tuple[str, str]]) -> PairIndex:
        # A blank target (a string a person chose to leave out) answers its source, guides nothing.
        return cls(dict(units), FuzzyIndex([unit for unit in units if unit[1].strip()]))


class Recall:
    """Lookups answered from indexes in process, so an exact answer costs a dict lookup: the store is
    asked only for the memories' versions, at most once every replica.memory_refresh_s (an index is
    rebuilt when its memory's version moved), and for a pair's units when its index is (re)built."""

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
        self._indexes: collections.OrderedDict[tuple[str, str, str], tuple[int, PairIndex]] = (
            collections.OrderedDict()
        )
        self._versions: dict[str, tuple[float, int]] = {}  # owner -> (when read, version)
        self._version_reads: SingleFlight[str, None] = SingleFlight()
        self._builds: SingleFlight[tuple[str, str, str, int], PairIndex] = SingleFlight()

    @property
    def enabled(self) -> bool:
        return self.cfg.memory

    def forget(self, owner: str) -> None:
        """After a change made through this replica: its next lookup reads the version again."""
        self._versions.pop(owner, None)

    async def versions(self, owners: list[str]) -> tuple[int, ...]:
        """Each owner's memory version, read again once it is memory_refresh_s old; a read under way
        is shared (every request of a burst finds the shared memory's version stale at once)."""
        now = time.monotonic()
        stale = [o for o in owners if now - self._versions.get(o, (-1e9, 0))[0] >= self.cfg.memory_refresh_s]
        if stale:
            await asyncio.gather(
                *(self._version_reads.do(o, functools.partial(self._read, o)) for o in stale)
            )
        return tuple(self._versions[o][1] for o in owners)

    async def _read(self, owner: str) -> None:
        now = time.monotonic()
        (version,) = await self.store.versions([owner])
        self._versions[owner] = (now, version)

    async def indexes(self, owners: list[str], pair: tuple[str, str]) -> list[PairIndex]:
        """The owners' indexes of the pair, in the owners' order; none for a memory that is empty."""
        versions = await self.versions(owners)
        return [await self._index(o, v, pair) for o, v in zip(owners, versions, strict=True) if v]

    @staticmethod
    def exact(indexes: list[PairIndex], texts: Sequence[str]) -> dict[str, str]:
        """Each text the indexes hold, with its target: the first owner's unit wins."""
        found: dict[str, str] = {}
        for index in reversed(indexes):
            found.update((text, index.exact[text]) for text in texts if text in index.exact)
        return found

    async def fuzzy(self, indexes: list[PairIndex], texts: Sequence[str]) -> list[list[Match]]:
        """Each text's best matches over the indexes, best first, at most memory_fuzzy_matches."""
        limit, threshold = self.cfg.memory_fuzzy_matches, self.cfg.memory_fuzzy_threshold
        if limit <= 0 or not texts or not indexes:
            return [[] for _ in texts]

        def search() -> list[list[Match]]:
            found = []
            for text in texts:
                matches = [m for index in indexes for m in index.fuzzy.best(text, threshold, limit)]
                found.append(sorted(matches, key=lambda m: -m.score)[:limit])
            return found

        # Off the event loop: scoring a text against a large memory takes milliseconds of CPU.
        return await asyncio.to_thread(search)

    async def _index(self, owner: str, version: int, pair: tuple[str, str]) -> PairIndex:
        key = (owner, *pair)
        kept = self._indexes.get(key)
        if kept is not None and kept[0] == version:
            self._indexes.move_to_end(key)
            return kept[1]
        return await self._builds.do((*key, version), functools.partial(self._build, key, version))

    async def _build(self, key: tuple[str, str, str], version: int) -> PairIndex:
        units = await self.store.pair_units(*key)
        index = await asyncio.to_thread(PairIndex.of, units)
        self._indexes[key] = (version, index)
        while len(self._indexes) > INDEXES_KEPT:
            self._indexes.popitem(last=False)
        return index

    async def whole(
        self, key_id: str | None, pair: tuple[str, str], texts: Sequence[str]
    ) -> tuple[dict[str, str], bool]:
        """The target of each text a memory holds whole (no engine), counted as exact answers, and
        whether the caller has any memory of the pair; StoreUnavailable when the store cannot say."""
        indexes = await self.indexes(owners_of(key_id), pair) if self.enabled else []
        found = self.exact(indexes, texts)
        self.count([EXACT] * sum(text in found for text in texts))  # a miss is counted where translated
        return found, any(index.exact for index in indexes)

    def count(self, results: Sequence[str]) -> None:
        for result in results:
            self.lookups.labels(result).inc()

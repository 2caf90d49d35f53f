"""A key's usage adds, many at once, reach the real SQLite store as one write per key and round: each
add returns once its characters are stored, and a store that fails counts the error, never hangs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client import CollectorRegistry

from hunyuan_serve.replica.usage import Usage
from hunyuan_serve.storage.backend import StoreUnavailable
from hunyuan_serve.storage.per_key import SqliteStore


class CountedStore(SqliteStore):
    """The real store, counting its writes; `failing` makes every write fail as a locked file does."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.writes = 0
        self.failing = False

    async def add_characters(self, owner: str, count: int) -> int:
        self.writes += 1
        if self.failing:
            raise StoreUnavailable("store file locked")
        return await super().add_characters(owner, count)


def test_many_adds_at_once_are_few_writes_and_each_is_stored_when_it_returns(tmp_path: Path) -> None:
    store = CountedStore(tmp_path / "store.sqlite")
    usage = Usage({}, store, CollectorRegistry())

    async def scenario() -> None:
        async def add(key: str, count: int) -> int:
            await usage.add(key, count)
            return await store.characters(key)  # what a read after the answer sees

        seen = await asyncio.gather(*(add("job" if i % 2 else "page", 3) for i in range(200)))
        assert await store.characters("job") == 300 and await store.characters("page") == 300
        # The first add is written alone; the 199 that came meanwhile, one write per key.
        assert store.writes <= 4, store.writes
        assert all(total >= 3 for total in seen)

    asyncio.run(scenario())


def test_a_failing_store_counts_the_error_and_lets_every_add_return(tmp_path: Path) -> None:
    store = CountedStore(tmp_path / "store.sqlite")
    registry = CollectorRegistry()
    usage = Usage({}, store, registry)
    store.failing = True

    async def scenario() -> None:
        await asyncio.wait_for(asyncio.gather(*(usage.add("job", 1) for _ in range(10))), 10)
        store.failing = False
        await usage.add("job", 2)
        assert await store.characters("job") == 2

    asyncio.run(scenario())
    errors = registry.get_sample_value("hunyuan_usage_store_errors_total", {"op": "add"})
    assert errors is not None and errors >= 1

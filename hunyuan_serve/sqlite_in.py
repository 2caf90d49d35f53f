"""SQLite `IN (...)` lookups cut into slices under its cap on bound parameters."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

# SQLite caps bound parameters per statement (999 on old builds).
SLICE = 500


def in_slices(keys: Sequence[str], size: int = SLICE) -> Iterator[tuple[list[str], str]]:
    """Each slice of keys with its placeholders ("?,?,?"), for `... IN ({marks})`."""
    for start in range(0, len(keys), size):
        part = list(keys[start : start + size])
        yield part, ",".join("?" * len(part))

"""What the translation memory did for one request: each text's result, the header and fields saying so."""

from __future__ import annotations

import contextvars
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

HEADER = "X-Hunyuan-Memory"
EXACT, FUZZY, MISS = "exact", "fuzzy", "miss"


@dataclass
class MemoryUse:
    """Filled by the translation core (once per core call: a split request adds up), read by the Gate
    (the header, every API) and by the answers that have a place for it (native /translate)."""

    results: list[str] = field(default_factory=list)  # EXACT, FUZZY or MISS per text looked up
    unguided: str = ""  # why close matches could not guide the model, when they could not

    def header(self) -> dict[str, str]:
        """X-Hunyuan-Memory: one word when every text had the same result, else the count of each."""
        if not self.results:
            return {}
        counts = Counter(self.results)
        if len(counts) == 1:
            return {HEADER: self.results[0]}
        return {HEADER: ", ".join(f"{kind}={counts[kind]}" for kind in (EXACT, FUZZY, MISS) if counts[kind])}

    def log(self) -> dict[str, Any]:
        if not self.results:
            return {}
        counts = Counter(self.results)
        fields: dict[str, Any] = {"memory_exact": counts[EXACT], "memory_fuzzy": counts[FUZZY]}
        if self.unguided:
            fields["memory_unguided"] = self.unguided
        return fields


# Set by the Gate to a fresh MemoryUse for each request: the core's task shares the object (a task
# copies the context, not what its variables point to), so what the core notes the Gate reads.
CURRENT: contextvars.ContextVar[MemoryUse | None] = contextvars.ContextVar("hunyuan_memory", default=None)


def begin() -> MemoryUse:
    use = MemoryUse()
    CURRENT.set(use)
    return use


def memory_fields(memory: list[str], unguided: str, batch: bool) -> dict[str, Any]:
    """Native /translate's `memory` (each text's result) and, when matches could not guide the model,
    `memory_unguided` saying why; nothing when no memory was looked up."""
    if not memory:
        return {}
    fields: dict[str, Any] = {"memory": memory if batch else memory[0]}
    if unguided:
        fields["memory_unguided"] = unguided
    return fields

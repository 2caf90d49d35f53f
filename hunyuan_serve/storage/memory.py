"""Translation memories as stored: units, the import each came from, and what a memory store answers."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Protocol

# The deployment's own memory, beside each key's: no key_id (a hex SHA-256) can be spelled so.
SHARED = "*"


class MemoryFull(ValueError):
    """An import that would take a memory past replica.memory_max_units; nothing of it is kept."""


@dataclass(frozen=True)
class Unit:
    """One pair of segments: source and target text in the service's language codes."""

    src: str
    tgt: str
    source: str
    target: str


@dataclass(frozen=True)
class Origin:
    """Where units came from (provenance): the file, when, who imported it, what made it, how many."""

    id: str
    owner: str
    name: str  # the file's name as given
    created: str  # ISO 8601 in UTC
    who: str  # the key's label, or the user who ran the CLI
    units: int
    tool: str = ""  # the TMX header's creationtool, when the file says

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Origin:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class Hit:
    """An exact match: the stored target, whose memory held it, and the import it came from."""

    target: str
    owner: str
    origin: str


class MemoryStore(Protocol):
    """Memories by owner (a key_id, or SHARED); every call raises StoreUnavailable when the store does not
    answer. Owners are searched in the order given: the caller's own memory before the shared one."""

    async def add(self, origin: Origin, units: list[Unit], max_units: int) -> int: ...

    async def origins(self, owner: str) -> list[Origin]: ...

    async def delete(self, owner: str, origin_id: str | None) -> int: ...

    async def units(self, owner: str) -> list[Unit]: ...

    async def exact(self, owners: list[str], src: str, tgt: str, texts: list[str]) -> dict[str, Hit]: ...

    async def pair_units(self, owner: str, src: str, tgt: str) -> list[tuple[str, str]]: ...

    async def versions(self, owners: list[str]) -> tuple[int, ...]: ...

    async def pairs(self, owners: list[str]) -> set[tuple[str, str]]: ...

    async def aclose(self) -> None: ...

"""What the `memory` command and the HTTP API both do: import a file with its provenance, export, list."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from hunyuan_serve.memory.pairs import memory_format, read_memory_file, write_memory_file
from hunyuan_serve.memory.tmx import MemoryFileInvalid
from hunyuan_serve.storage.memory import MemoryStore, Origin


async def import_file(
    store: MemoryStore,
    owner: str,
    name: str,
    who: str,
    data: bytes,
    fmt: str | None = None,
    languages: tuple[str | None, str | None] = (None, None),
    max_units: int = 200_000,
    keep_blank: bool = False,
) -> Origin:
    """The file read whole, then stored in one step with where it came from; MemoryFileInvalid or
    MemoryFull (nothing kept) otherwise. keep_blank: units with an empty target are translations."""
    kind = memory_format(name, fmt)
    parsed = read_memory_file(data, kind, *languages, keep_blank=keep_blank)
    if not parsed.units:
        raise MemoryFileInvalid(f"{name or 'the file'}: no translation units in it")
    if len(parsed.units) > max_units:  # refused before the store is asked
        raise MemoryFileInvalid(
            f"{name or 'the file'} holds {len(parsed.units)} units; a memory holds at most {max_units} "
            "(replica.memory_max_units)"
        )
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    origin = Origin(uuid.uuid4().hex, owner, name, now, who, len(parsed.units), parsed.tool)
    await store.add(origin, parsed.units, max_units)
    return origin


async def export_file(store: MemoryStore, owner: str, fmt: str) -> bytes:
    return write_memory_file(await store.units(owner), memory_format("", fmt))


def origin_json(origin: Origin) -> dict[str, Any]:
    """An import as the API and `memory list --json` show it."""
    return {
        "id": origin.id,
        "file": origin.name,
        "imported": origin.created,
        "by": origin.who,
        "units": origin.units,
        "tool": origin.tool,
    }

"""`translate --memory FILE`: a translation memory file's units for the run's language pair."""

from __future__ import annotations

from pathlib import Path

from hunyuan_serve.memory.pairs import memory_format, read_memory_file
from hunyuan_serve.memory.tmx import MemoryFileInvalid, language_code


def load_memory(path: Path, source: str | None, target: str, keep_blank: bool = False) -> dict[str, str]:
    """Source -> target of every unit into `target` (from `source`, when the run names it; the last
    unit of a source wins, as in the service's memory); keep_blank: a unit with an empty target is
    a translation that leaves the text out. Raises MemoryFileInvalid (or OSError)."""
    data = path.read_bytes()
    units = read_memory_file(data, memory_format(path.name, None), source, target, keep_blank).units
    src = language_code(source) if source else None
    tgt = language_code(target)
    return {u.source: u.target for u in units if u.tgt == tgt and (src is None or u.src == src)}


__all__ = ["MemoryFileInvalid", "load_memory"]

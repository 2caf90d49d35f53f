"""The translation memory's settings: its size bound, and how alike a match must be to guide the model."""

from __future__ import annotations

from pydantic import Field

from hunyuan_serve.config.base import Section


class MemorySettings(Section):
    """Fields of the replica section (ReplicaConfig derives from this): the memories every key and the
    deployment keep in the store (SQLite on one host, Redis on many), see docs/memory.md."""

    memory: bool = Field(
        True,
        description="Look every translated text up in the translation memories: an exact match is the "
        "answer (no engine call), close ones guide the model's prompt.",
    )
    # 100,000 units import within 30 s on a 2-core machine (bench); a replica keeps the language pairs
    # it was asked for in its fuzzy index, so this also bounds a replica's memory use per memory.
    memory_max_units: int = Field(
        200_000, ge=1, description="Most units one memory (a key's, or the deployment's) holds."
    )
    memory_max_import_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description="Largest memory file the HTTP API imports (nginx.client_max_body_size must allow it "
        "too); the CLI imports any size.",
    )
    # Weblate shows machinery suggestions from 75 up (MACHINERY_DEFAULT_THRESHOLD); below that a match
    # shares too little of the text to help the model more than it misleads it.
    memory_fuzzy_threshold: float = Field(
        75.0, ge=0, le=100, description="Least similarity (0-100) for a memory match to guide the model."
    )
    memory_fuzzy_matches: int = Field(
        3, ge=0, description="Most memory matches put into one text's prompt (0: no fuzzy guidance)."
    )
    # Exact answers come from each replica's index in process (a dict lookup, well under 1 ms even on a
    # busy 2-core host, where a read through the store's I/O thread took 3 ms at p99): the store is asked
    # whether a memory changed at most this often, so another replica's import is seen within it.
    memory_refresh_s: float = Field(
        1.0,
        ge=0,
        description="How often a replica asks the store whether a memory changed (0: on every request); "
        "an import through another replica or the CLI is answered from within this many seconds.",
    )
    memory_import_timeout_s: float = Field(
        60.0, gt=0, description="Longest a memory import, export or delete may wait for Redis."
    )

"""A document job (DeepL /v2/document, LibreTranslate /translate_file) and what its queue offers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

JOB_COLUMNS = (
    "id, owner, key_hash, state, filename, format, source, target, created, updated, segments_total,"
    " segments_done, segments_cached, billed_characters, attempts, started, lease_owner, lease_until, error,"
    " options"
)
# Job's fields by name, in its order (the SQLite columns, the Redis hash fields).
JOB_FIELDS = tuple(f.strip() for f in JOB_COLUMNS.split(","))


@dataclass(frozen=True)
class Job:
    """One document job as stored. lease_until: when the replica holding it is taken for dead."""

    id: str
    owner: str  # the key_id of the key that made it ("" without keys): only it reads the job
    key_hash: str  # SHA-256 of the document_key handed out at upload (the key itself is not kept)
    state: str
    filename: str
    format: str
    source: str | None
    target: str
    created: float
    updated: float
    segments_total: int = 0
    segments_done: int = 0
    segments_cached: int = 0
    billed_characters: int = 0
    attempts: int = 0
    started: float | None = None
    lease_owner: str | None = None
    lease_until: float = 0.0
    error: str | None = None
    options: str | None = None  # JSON: what the upload asked for besides the languages (glossary terms)


class Documents(Protocol):
    """Where document jobs live (DocumentJobs: one host's SQLite file; RedisDocumentJobs: every host's);
    every call raises StoreUnavailable when the store does not answer."""

    def add(self, job: Job, data: bytes) -> None: ...

    def get(self, owner: str, job_id: str) -> Job | None: ...

    def claim(self, holder: str, lease_s: float, max_attempts: int) -> tuple[Job, bytes] | None: ...

    def progress(
        self, job_id: str, holder: str, lease_s: float, done: int, total: int, cached: int
    ) -> bool: ...

    def finish(self, job_id: str, holder: str, result: bytes, billed: int) -> bool: ...

    def fail(self, job_id: str, holder: str, error: str) -> bool: ...

    def release(self, job_id: str, holder: str) -> bool: ...

    def result(self, owner: str, job_id: str, remove: bool) -> tuple[str, bytes] | None: ...

    def expire(self, ttl_s: float) -> int: ...

    def close(self) -> None: ...

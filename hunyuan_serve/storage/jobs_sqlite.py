"""The document-job queue in the host's SQLite store file: each change one statement."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hunyuan_serve.storage.backend import StoreUnavailable, open_wal
from hunyuan_serve.storage.jobs import JOB_COLUMNS, Job

DOCUMENTS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS documents (id TEXT PRIMARY KEY, owner TEXT NOT NULL, key_hash TEXT NOT NULL,"
    " state TEXT NOT NULL, filename TEXT NOT NULL, format TEXT NOT NULL, source TEXT, target TEXT NOT NULL,"
    " created REAL NOT NULL, updated REAL NOT NULL, segments_total INTEGER NOT NULL DEFAULT 0,"
    " segments_done INTEGER NOT NULL DEFAULT 0, segments_cached INTEGER NOT NULL DEFAULT 0,"
    " billed_characters INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0, started REAL,"
    " lease_owner TEXT, lease_until REAL NOT NULL DEFAULT 0, error TEXT, options TEXT, input BLOB NOT NULL,"
    " result BLOB)",
    "CREATE INDEX IF NOT EXISTS documents_state ON documents (state, created)",
)


class DocumentJobs:
    """Document jobs in one SQLite file every replica of the host opens (WAL). Each change is one
    statement, so two replicas never take the same job: a claim is an UPDATE of the oldest claimable
    row that only one of them wins, and every later write names the lease it holds (a replica whose
    lease ran out and was retaken writes nothing more).

    Plain methods (the worker calls them from its own thread; routes through asyncio.to_thread), on one
    connection behind a lock; the clock is passed in so that the unit tests drive leases with a fake one.
    """

    def __init__(
        self, path: str | Path, busy_timeout_s: float = 5.0, clock: Callable[[], float] | None = None
    ) -> None:
        import threading
        import time

        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self.clock = clock or time.time
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = open_wal(self.path, self.busy_timeout_s, DOCUMENTS_SCHEMA)
        return self._db

    def _run(self, query: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        try:
            with self._lock:
                return self._open().execute(query, args)
        except (sqlite3.Error, OSError) as err:
            raise StoreUnavailable(f"document store file {self.path}: {err}") from None

    def add(self, job: Job, data: bytes) -> None:
        """A new queued job with its upload, in one INSERT (nothing is kept of a refused upload)."""
        row = (job.id, job.owner, job.key_hash, job.state, job.filename, job.format, job.source, job.target)
        self._run(
            "INSERT INTO documents (id, owner, key_hash, state, filename, format, source, target, created,"
            " updated, segments_total, options, input) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*row, job.created, job.created, job.segments_total, job.options, data),
        )

    def get(self, owner: str, job_id: str) -> Job | None:
        """The owner's job (another key's is None, as one that never was)."""
        query = f"SELECT {JOB_COLUMNS} FROM documents WHERE id = ? AND owner = ?"
        return _job(self._run(query, (job_id, owner)).fetchone())

    def claim(self, holder: str, lease_s: float, max_attempts: int) -> tuple[Job, bytes] | None:
        """The oldest queued job, or one whose lease ran out, now held by `holder`; with its upload.

        A job taken max_attempts times already (each time its replica died) becomes an error instead:
        a file that kills every replica that reads it must not go round the replicas for ever.
        """
        now = self.clock()
        self._run(
            "UPDATE documents SET state = 'error', lease_owner = NULL, updated = ?, error = ?"
            " WHERE state = 'translating' AND lease_until < ? AND attempts >= ?",
            (now, f"the job was taken up {max_attempts} times and never finished", now, max_attempts),
        )
        query = (
            "UPDATE documents SET state = 'translating', lease_owner = ?, lease_until = ?, updated = ?,"
            " attempts = attempts + 1, started = COALESCE(started, ?) WHERE id = (SELECT id FROM documents"
            " WHERE state = 'queued' OR (state = 'translating' AND lease_until < ?) ORDER BY created LIMIT 1)"
            f" RETURNING {JOB_COLUMNS}, input"
        )
        row = self._run(query, (holder, now + lease_s, now, now, now)).fetchone()
        job = _job(row[:-1]) if row is not None else None
        return None if row is None or job is None else (job, bytes(row[-1]))

    def progress(self, job_id: str, holder: str, lease_s: float, done: int, total: int, cached: int) -> bool:
        """Segment counts, and the lease renewed; False when the lease is no longer this holder's."""
        now = self.clock()
        cursor = self._run(
            "UPDATE documents SET segments_done = ?, segments_total = ?, segments_cached = ?,"
            " lease_until = ?, updated = ? WHERE id = ? AND lease_owner = ? AND state = 'translating'",
            (done, total, cached, now + lease_s, now, job_id, holder),
        )
        return cursor.rowcount > 0

    def finish(self, job_id: str, holder: str, result: bytes, billed: int) -> bool:
        cursor = self._run(
            "UPDATE documents SET state = 'done', result = ?, billed_characters = ?, lease_owner = NULL,"
            " segments_done = segments_total, updated = ? WHERE id = ? AND lease_owner = ?",
            (result, billed, self.clock(), job_id, holder),
        )
        return cursor.rowcount > 0

    def fail(self, job_id: str, holder: str, error: str) -> bool:
        cursor = self._run(
            "UPDATE documents SET state = 'error', error = ?, lease_owner = NULL, updated = ?"
            " WHERE id = ? AND lease_owner = ?",
            (error[:1000], self.clock(), job_id, holder),
        )
        return cursor.rowcount > 0

    def release(self, job_id: str, holder: str) -> bool:
        """Back to queued (this replica is stopping): the next replica need not wait out the lease."""
        cursor = self._run(
            "UPDATE documents SET state = 'queued', lease_owner = NULL, lease_until = 0, updated = ?"
            " WHERE id = ? AND lease_owner = ? AND state = 'translating'",
            (self.clock(), job_id, holder),
        )
        return cursor.rowcount > 0

    def result(self, owner: str, job_id: str, remove: bool) -> tuple[str, bytes] | None:
        """A done job's file name and result; remove: in the same statement the job is deleted (DeepL's
        one download), so two downloads racing get it once."""
        verb = "DELETE FROM documents" if remove else "SELECT filename, result FROM documents"
        query = f"{verb} WHERE id = ? AND owner = ? AND state = 'done'"
        row = self._run(query + (" RETURNING filename, result" if remove else ""), (job_id, owner)).fetchone()
        return None if row is None else (str(row[0]), bytes(row[1]))

    def expire(self, ttl_s: float) -> int:
        """Jobs untouched for ttl_s (never downloaded, or an error nobody read) are deleted."""
        return self._run("DELETE FROM documents WHERE updated < ?", (self.clock() - ttl_s,)).rowcount

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _job(row: Any) -> Job | None:
    return None if row is None else Job(*row)

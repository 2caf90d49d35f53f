"""The replica's document worker: takes a job under a lease, translates it with localize() and the core."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field

from hunyuan_serve import auth
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.families import CHIMERA
from hunyuan_serve.families.base import CONTEXT, PRESERVE_FORMAT
from hunyuan_serve.localization.formats import FormatError
from hunyuan_serve.localization.localize import Summary, localize
from hunyuan_serve.localization.store import TranslationStore
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.documents.core import CoreService
from hunyuan_serve.replica.documents.files import ParsedDocument, read
from hunyuan_serve.storage.backend import StoreUnavailable
from hunyuan_serve.storage.from_config import document_cache_path
from hunyuan_serve.storage.jobs import Documents, Job

logger = logging.getLogger(__name__)
# A stopping replica waits this long for a worker thread to hand its job back.
_STOP_WAIT_S = 10.0
# How soon a job in hand notices that its replica is stopping.
_STOP_CHECK_S = 0.5


class LeaseLost(Exception):
    """Another replica holds the job now (this one was taken for dead): stop writing to it."""


def key_ids(cfg: ServeConfig) -> set[str]:
    """The key_id of each key of the keys file: a job is translated for the key that made it, so its
    characters count for that key, only while that key is still there."""
    if not cfg.auth.keys_file:
        return set()
    return {auth.key_id(key) for key in auth.load_keys(cfg.auth.keys_file)}


def _terms(job: Job) -> dict[str, str] | None:
    """The glossary terms the upload named (the family's terminology prompt gets those in each text)."""
    terms = json.loads(job.options).get("terms") if job.options else None
    return dict(terms) if terms else None


@dataclass
class _Counts:
    total: int = 0
    not_sent: int = 0  # held by the cache (or nothing to translate) at this attempt's start
    sent: int = 0

    def done(self) -> int:
        return self.not_sent + self.sent


@dataclass
class DocumentWorker:
    """document_workers threads, each with its own event loop: a job's parsing, rendering and SQLite
    cache never hold up the replica's loop, where its segments go to the translation core. Each takes
    a job only while its replica is ready; a Chimera replica, which only fuses, takes none."""

    cfg: ServeConfig
    replica: ReplicaContext
    # The instruction fields the pool's prompt family takes (FAMILY_FEATURES): msgctxt goes as context
    # and inline markup through the formatted prompt only where it has them, as the CLI decides it.
    features: tuple[str, ...] = ()
    # The process id first: an operator (and the e2e test) can tell which replica holds a job.
    holder: str = field(default_factory=lambda: f"{os.getpid()}-{uuid.uuid4().hex[:12]}")
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _keys: set[str] = field(default_factory=set)
    _counts: dict[str, _Counts] = field(default_factory=dict)  # each job in hand, by id
    _loop: asyncio.AbstractEventLoop | None = None  # the replica's, where the core runs

    @property
    def jobs(self) -> Documents:
        return self.replica.documents

    def start(self) -> None:
        """Called on the replica's loop (its lifespan): the workers' calls to the core are sent there."""
        if self.replica.family == CHIMERA:
            return
        self._loop = asyncio.get_running_loop()
        self._keys = key_ids(self.cfg)
        for number in range(self.cfg.replica.document_workers):
            thread = threading.Thread(target=self._serve, name=f"documents-{number}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(_STOP_WAIT_S)

    def _serve(self) -> None:
        rcfg = self.cfg.replica
        while not self._stop.wait(rcfg.document_poll_s):
            if not self.replica.lifecycle.ready:
                continue
            try:
                self.jobs.expire(rcfg.document_ttl_s)
                claimed = self.jobs.claim(self.holder, rcfg.document_lease_s, rcfg.document_max_attempts)
            except StoreUnavailable as err:
                logger.warning("document store: %s", err)
                continue
            if claimed is None:
                continue
            try:
                asyncio.run(self._run(*claimed))
            except Exception:  # the store failed under the job: its lease runs out, another retakes it
                logger.exception("document %s: left to its lease", claimed[0].id)

    async def _run(self, job: Job, data: bytes) -> None:
        """One job to its end: done, error, lost to another replica, or handed back when stopping."""
        logger.info("document %s: taken (attempt %d, %s)", job.id, job.attempts, job.format)
        try:
            parsed = read(data, job.filename, job.format, job.target, job.source)
        except (FormatError, UnicodeDecodeError, ValueError) as err:
            self.jobs.fail(job.id, self.holder, f"The file cannot be read as {job.format}: {err}")
            return
        if job.owner and job.owner not in self._keys:
            self.jobs.fail(job.id, self.holder, "the key that made this job is no longer in the keys file")
            return
        work = asyncio.ensure_future(self._translate(job, parsed))
        watch = asyncio.ensure_future(self._watch(job, work))
        try:
            await work
        except LeaseLost:
            logger.warning("document %s: its lease went to another replica", job.id)
        except asyncio.CancelledError:
            self.jobs.release(job.id, self.holder)  # stopping: the next replica takes it at once
        except Exception as err:  # the service refused or failed: the job says why
            logger.exception("document %s failed", job.id)
            self.jobs.fail(job.id, self.holder, f"{type(err).__name__}: {err}")
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)

    async def _watch(self, job: Job, work: asyncio.Future[None]) -> None:
        """The lease renewed every third of it (a batch may take longer than the lease); the work
        cancelled when the replica stops, or when another replica has taken the job meanwhile."""
        every = self.cfg.replica.document_lease_s / 3
        renewed = time.monotonic()
        while not work.done():
            await asyncio.sleep(min(every, _STOP_CHECK_S))
            if self._stop.is_set():
                work.cancel()
                return
            if time.monotonic() - renewed < every:
                continue
            renewed = time.monotonic()
            counts = self._counts.get(job.id, _Counts())
            if not await asyncio.to_thread(self._renew, job, counts):
                work.cancel()
                return

    def _renew(self, job: Job, counts: _Counts) -> bool:
        lease = self.cfg.replica.document_lease_s
        return self.jobs.progress(job.id, self.holder, lease, counts.done(), counts.total, counts.not_sent)

    async def _translate(self, job: Job, parsed: ParsedDocument) -> None:
        rcfg = self.cfg.replica
        counts = _Counts(total=len(parsed.segments))
        self._counts[job.id] = counts
        assert self._loop is not None, "start() runs before a job is taken"
        # Bulk, with the job's key: people's requests go first at the engine (replica/admission/priority.py).
        service = CoreService(
            self.replica,
            self._loop,
            job.owner or None,
            job.id,
            rcfg.document_batch_size,
            rcfg.document_concurrency,
        )

        def on_total(to_send: int) -> None:
            counts.not_sent = counts.total - to_send
            self._report(job, counts)

        def on_progress(done: int, _total: int) -> None:
            counts.sent = done
            self._report(job, counts)

        store = TranslationStore(document_cache_path(self.cfg))
        try:
            texts, summary = await localize(
                parsed.segments,
                parsed.labels,
                service,
                job.target,
                job.source,
                terms=_terms(job),
                store=store,
                contexts=list(parsed.contexts) if CONTEXT in self.features and any(parsed.contexts) else None,
                formatted=parsed.formatted if PRESERVE_FORMAT in self.features else None,
                on_total=on_total,
                progress=on_progress,
            )
        finally:
            store.close()
            self._counts.pop(job.id, None)
        if summary.aborted and service.unanswered is not None:
            # As when its replica dies: taken up again once the lease runs out (document_max_attempts
            # bounds it), resuming from the segment cache.
            logger.warning("document %s: left to its lease: %s", job.id, service.unanswered)
            return
        self._finish(job, parsed, texts, summary)

    def _report(self, job: Job, counts: _Counts) -> None:
        """Progress per batch (it renews the lease too); a lease that is gone stops the job here."""
        if not self._renew(job, counts):
            raise LeaseLost(job.id)

    def _finish(self, job: Job, parsed: ParsedDocument, texts: list[str], summary: Summary) -> None:
        if summary.aborted:
            self.jobs.fail(job.id, self.holder, f"Translation failed: {summary.aborted}")
            return
        result = parsed.render(texts, frozenset(summary.failed_at))
        billed = sum(len(segment) for segment in parsed.segments)
        if self.jobs.finish(job.id, self.holder, result, billed):
            logger.info("document %s: done (%s)", job.id, summary.line())

"""A document job's translation service: this replica's translation core, called in-process."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from hunyuan_serve.languages import AUTO, UnknownLanguage, find_language
from hunyuan_serve.localization.answers import QaFlag, TranslateError, Translation
from hunyuan_serve.localization.batches import Progress, Width, map_batches
from hunyuan_serve.qa import policy
from hunyuan_serve.replica import deadline
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.apis.compat import sources_of
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.errors import ApiError, request_fault
from hunyuan_serve.replica.outcome import Outcome
from hunyuan_serve.replica.schema import TranslateRequest, parse_fields
from hunyuan_serve.storage.backend import StoreUnavailable

T = TypeVar("T")


@dataclasses.dataclass
class CoreService:
    """localization's Service for one job: each batch is what a native /translate of the job's key asks
    the core, as bulk work (the engine's gate lets people in first), billed to the key, under
    request_timeout_s, its refusals the statuses that route answers. Called from the worker's own
    loop; the core runs on the replica's loop, where its engine, caches and in-flight calls live."""

    replica: ReplicaContext
    loop: asyncio.AbstractEventLoop  # the replica's
    owner: str | None  # the job's key_id (None on a replica without keys)
    job_id: str
    batch_size: int
    concurrency: int
    # The last batch the core did not answer (its deadline passed, or the engine failed): where the HTTP
    # client retried elsewhere, the job is left to its lease for any replica to take up again.
    unanswered: TranslateError | None = None
    _ids: itertools.count[int] = dataclasses.field(default_factory=itertools.count)

    async def _on_replica(self, work: Coroutine[Any, Any, T]) -> T:
        # Cancelling this (the job stops) cancels the work on the replica's loop: its engine calls abort.
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self.loop))

    async def translate_texts(
        self,
        texts: Sequence[str],
        target: str,
        source: str | None = None,
        options: Mapping[str, Any] | None = None,
        *,
        glossary: Mapping[str, str] | None = None,
        context: str | None = None,
        style: str | None = None,
    ) -> list[Translation]:
        fields: dict[str, Any] = {"texts": list(texts), "target_lang": target}
        instructions = {"source_lang": source, "context": context, "style": style}
        fields.update({name: value for name, value in instructions.items() if value})
        if glossary:
            fields["glossary"] = dict(glossary)
        fields.update({name: value for name, value in (options or {}).items() if value is not None})
        return await self._on_replica(self._answered(fields))

    async def map_batches(
        self,
        texts: Sequence[str],
        work: Callable[[list[str]], Awaitable[T]],
        progress: Progress | None = None,
    ) -> list[T]:
        width = Width(self.concurrency)
        return await map_batches(texts, self.batch_size, width, self.concurrency, work, progress)

    async def memory_lookup(self, texts: Sequence[str], target: str, source: str) -> dict[str, str]:
        try:
            pair = (find_language(source).code, find_language(target).code)
        except UnknownLanguage:
            return {}
        try:
            found, _ = await self._on_replica(self.replica.recall.whole(self.owner, pair, texts))
        except StoreUnavailable:  # help, not a condition: the texts are translated instead
            return {}
        return found

    async def served_model(self) -> str | None:
        return self.replica.engine.model_name

    async def _answered(self, fields: dict[str, Any]) -> list[Translation]:
        """One batch through the core, each refusal or failure as the HTTP route's status."""
        rcfg = self.replica.cfg
        try:
            req = parse_fields(fields, rcfg, self.replica.sampling, self.replica.engine.max_model_len)
            count = sum(len(text) for text in req.texts)
            await self.replica.usage.check(self.owner, count)
            priority.KEY.set(self.owner)  # the key's answer-check policy (this task's context only)
            outcome = await self._in_time(req)
        except ApiError as err:
            raise TranslateError(err.status, err.code, err.message) from None
        except TimeoutError:
            message = f"no answer within request_timeout_s={rcfg.request_timeout_s:g} seconds"
            self.unanswered = TranslateError(504, "deadline_exceeded", message)
            raise self.unanswered from None
        except (TranslateError, asyncio.CancelledError):
            raise
        except Exception as err:
            fault = request_fault(err)  # the input's fault, as the Gate tells them apart
            if fault is not None:
                raise TranslateError(fault.status, fault.code, fault.message) from None
            self.unanswered = TranslateError(503, "engine_error", f"engine failed: {type(err).__name__}")
            raise self.unanswered from err
        await self.replica.usage.add(self.owner, count)
        return _translations(req, outcome)

    async def _in_time(self, req: TranslateRequest) -> Outcome:
        """The core's answer by request_timeout_s, as http.guarded runs a route's: a retry under way at
        the deadline is cut and the answers in hand given (qa_retry_reserve_s more); else TimeoutError."""
        rcfg = self.replica.cfg
        due = deadline.Deadline.after(rcfg.request_timeout_s)
        # Past the deadline, or this job stopping: the call is cancelled, so its engine calls abort.
        return await deadline.finished(due, self._translate(req), rcfg.qa_retry_reserve_s)

    async def _translate(self, req: TranslateRequest) -> Outcome:
        """The core's answer; without a source, each text's detected, one core call per language (as
        native /translate answers a batch of mixed languages)."""
        caller = priority.Caller(f"document-{self.job_id}-{next(self._ids)}", priority.BULK, self.owner)
        translator = self.replica.translator
        detected = sources_of(self.replica, req, html=False, by_script=False) if req.source is AUTO else []
        if not detected:
            return await translator.translate(req, caller)
        order: dict[str, list[int]] = {}
        for index, found in enumerate(detected):
            order.setdefault(found.language.code, []).append(index)
        merged = Outcome(results=[""] * len(req.texts), cached=[False] * len(req.texts))
        merged.verdicts.flags = [[] for _ in req.texts]
        for indexes in order.values():
            texts = tuple(req.texts[i] for i in indexes)
            sub = dataclasses.replace(req, texts=texts, source=detected[indexes[0]].language)
            part = await translator.translate(sub, caller)
            merged.verdicts.policy = part.verdicts.policy
            for k, index in enumerate(indexes):
                merged.results[index], merged.cached[index] = part.results[k], part.cached[k]
                if part.verdicts.flags:
                    merged.verdicts.flags[index] = part.verdicts.flags[k]
        return merged


def _translations(req: TranslateRequest, outcome: Outcome) -> list[Translation]:
    """Each text's answer as the HTTP client reads native /translate's: its failed checks (None: QA
    off, unchecked) and what the translation memory did ("": not looked up)."""
    flags = outcome.verdicts.flags if outcome.verdicts.policy != policy.OFF else None
    if flags is not None and len(flags) != len(req.texts):
        flags = None
    answers = []
    for index, text in enumerate(req.texts):
        qa = None if flags is None else tuple(QaFlag(f.check, f.detail) for f in flags[index] if f.check)
        memory = outcome.memory[index] if outcome.memory else ""
        answers.append(Translation(text, outcome.results[index], outcome.cached[index], qa=qa, memory=memory))
    return answers

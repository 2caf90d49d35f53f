"""The answer checks in the translation core: the policy that applies, each text checked, one retry."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.requests import Request

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.families import format_tags
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.qa import policy
from hunyuan_serve.qa.check import Answer, check, check_generation
from hunyuan_serve.qa.flags import HEADER, Flag, header_value
from hunyuan_serve.replica import deadline, turns
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.metrics import Metrics

if TYPE_CHECKING:
    from hunyuan_serve.replica.schema import TranslateRequest


# The core's engine call for one prompt (Translator._run: metrics counted, the request's priority).
Generate = Callable[[Prompt, Sampling, str], Awaitable[Generation]]
# The Chimera pool's fusion of one text's answers (its index in the request): the fused text, or None
# when the pool could not (the answers then stand as they are).
Fuse = Callable[["TranslateRequest", int, Sequence[str], str], Awaitable[str | None]]
# The request being served (set by the Gate): the fusion sends its caller's key on, as an ensemble does.
REQUEST: contextvars.ContextVar[Request | None] = contextvars.ContextVar("hunyuan_qa_request", default=None)
T = TypeVar("T")
_log = logging.getLogger(__name__)


def request_policy(value: Any) -> str | None:
    """A request's `qa` field: off, flag or retry (None: not given), else a 422 naming the field."""
    try:
        return policy.parse_policy(value)
    except policy.PolicyInvalid as err:
        raise ApiError(422, "invalid_parameter", str(err)) from None


@dataclass
class Verdicts:
    """The checks' result for one request's texts, in input order: the policy that applied (off: no
    check ran, and no answer says anything), each text's failed checks, and what a retry did."""

    policy: str = policy.OFF
    flags: list[list[Flag]] = field(default_factory=list)
    retried: int = 0  # texts generated again (policy retry)
    replaced: int = 0  # of those, the texts whose second answer (or fusion) was kept: fewer checks failed
    fused: int = 0  # of those, the texts whose two answers the Chimera pool fused, the fusion kept
    unfinished: int = 0  # texts whose retry the deadline cut short: their first answer stands

    def headers(self) -> dict[str, str]:
        """X-Hunyuan-QA (qa/flags.py header_value), unless the policy is off."""
        return {} if self.policy == policy.OFF else {HEADER: header_value(self.flags)}

    def body(self, batch: bool) -> dict[str, Any]:
        """Native /translate's `qa`: a text's list of {check, detail}, or a batch's list of those."""
        if self.policy == policy.OFF:
            return {}
        lists = [[flag.as_json() for flag in each] for each in self.flags]
        return {"qa": lists if batch else lists[0]}

    def log(self) -> dict[str, Any]:
        """The request log line's fields: the header's summary, and the retries when there were any."""
        if self.policy == policy.OFF:
            return {}
        fields: dict[str, Any] = {"qa": header_value(self.flags)}
        if self.retried:
            fields.update(qa_retried=self.retried, qa_replaced=self.replaced)
        if self.fused:
            fields["qa_fused"] = self.fused
        if self.unfinished:
            fields["qa_retry_unfinished"] = self.unfinished
        return fields


@dataclass(frozen=True)
class Second:
    """A retry's answer to one text: the generation, its text as sent, markup lost, whether it was kept."""

    index: int
    generation: Generation
    text: str
    lost: tuple[str, ...]
    kept: bool


def readable(req: TranslateRequest, index: int, answer: str) -> tuple[str, tuple[str, ...]]:
    """The answer as the caller gets it: with preserve_format, its markup put back (and what was lost)."""
    if not req.preserve_format:
        return answer, ()
    restored = format_tags.unwrap(answer, format_tags.wrap(req.texts[index]))
    return restored.text, restored.lost


class Review:
    """Checks the core's answers as the policy says, counts each failed check, retries under retry."""

    def __init__(
        self,
        cfg: QaSettings,
        metrics: Metrics,
        key_qa: Mapping[str, str] | None = None,
        fuse: Fuse | None = None,
    ) -> None:
        self.cfg = cfg
        self.fuse = fuse  # where a Chimera pool exists: fusing a text's two answers is a third try
        self.flags = metrics.count_qa()  # hunyuan_qa_flags_total, registered once per replica
        self.pool = cfg.qa_pool_label  # its pool label: the pool this replica serves
        self.key_qa: Mapping[str, str] = key_qa or {}  # each key's qa= by key_id (the keys file)
        self._ids = itertools.count()

    def policy(self, requested: str | None) -> str:
        """The request's policy, else its key's (the Gate's priority.KEY), else the pool's replica.qa."""
        owner = priority.KEY.get()
        return policy.effective(requested, self.key_qa.get(owner) if owner else None, self.cfg.qa)

    def judge(self, req: TranslateRequest, results: Sequence[str], reasons: Sequence[str | None]) -> Verdicts:
        """Every text's answer checked as the request's policy says (counted by `count` once final)."""
        verdicts = Verdicts(self.policy(req.qa))
        if verdicts.policy != policy.OFF:
            verdicts.flags = [
                self._check(req, source, result, reason)
                for source, result, reason in zip(req.texts, results, reasons, strict=True)
            ]
        return verdicts

    async def judged(
        self, req: TranslateRequest, results: Sequence[str], reasons: Sequence[str | None]
    ) -> Verdicts:
        """judge(), the event loop given a turn between slices of a long batch (replica/turns.py), of
        the core's answers: a deadline that falls from here on finds them in hand (deadline.settled)."""
        deadline.answered()
        verdicts = Verdicts(self.policy(req.qa))
        if verdicts.policy != policy.OFF:
            check = functools.partial(self._check, req)
            verdicts.flags = await turns.mapped(check, req.texts, results, reasons)
        return verdicts

    def generations(self, generations: Sequence[Generation]) -> Verdicts:
        """Answers to prompts as a client wrote them (OpenAI's routes): what needs no languages."""
        verdicts = Verdicts(self.policy(None))
        if verdicts.policy != policy.OFF:
            verdicts.flags = [check_generation(g.text, g.finish_reason, self.cfg) for g in generations]
        return verdicts

    def count(self, flags: Sequence[Sequence[Flag]]) -> None:
        for each in flags:
            for flag in each:
                self.flags.labels(check=flag.check, pool=self.pool).inc()

    def fused(self, req: TranslateRequest, results: Sequence[str]) -> Verdicts:
        """An ensemble's fused answers (or a stream's whole one), checked and counted: flagged only, as
        what the Chimera fused is not generated again."""
        verdicts = self.judge(req, results, ["stop"] * len(results))
        self.count(verdicts.flags)
        return verdicts

    async def retry(
        self,
        generate: Generate,
        req: TranslateRequest,
        prompts: Sequence[Prompt],
        verdicts: Verdicts,
        request_id: str,
        results: Sequence[str] = (),
    ) -> list[Second]:
        """Under retry, each flagged text generated once more, all at once (never from the cache, never
        joined to another call); a second answer is kept when it fails fewer checks (verdicts updated).
        Where a Chimera pool fuses (self.fuse), a text still flagged has its two answers (`results`:
        the first ones) fused, kept the same way. Every answer tried is returned, for the core to
        count its tokens and cache those kept. A second answer not in by the request's deadline is given
        up (`_in_time`), as is one that failed: the first stands, flagged."""
        flagged = [index for index, each in enumerate(verdicts.flags) if each]
        if verdicts.policy != policy.RETRY or not flagged:
            return []
        sampling = self._second_sampling(req.sampling)
        calls = [generate(prompts[i], sampling, f"{request_id}-{i}-qa{next(self._ids)}") for i in flagged]
        seconds = []
        for index, generation in zip(flagged, await self._in_time(calls), strict=True):
            if generation is None:
                verdicts.unfinished += 1
                continue
            text, lost = readable(req, index, generation.text)
            flags = self._check(req, req.texts[index], text, generation.finish_reason)
            kept = policy.better(verdicts.flags[index], flags)
            if kept:
                verdicts.flags[index] = flags
            seconds.append(Second(index, generation, text, lost, kept))
        verdicts.retried = len(seconds)
        if self.fuse is not None and results and not req.preserve_format:
            seconds = await self._fusions(self.fuse, req, results, seconds, verdicts, request_id)
        verdicts.replaced = sum(each.kept for each in seconds)
        return seconds

    async def _fusions(
        self,
        fuse: Fuse,
        req: TranslateRequest,
        results: Sequence[str],
        seconds: list[Second],
        verdicts: Verdicts,
        request_id: str,
    ) -> list[Second]:
        """The texts still flagged after their second answer: both answers fused by the Chimera pool;
        a fusion that fails fewer checks than the better of the two replaces it (None: not fused)."""
        still = [each for each in seconds if verdicts.flags[each.index]]
        calls = [
            fuse(req, each.index, (results[each.index], each.text), f"{request_id}-qa") for each in still
        ]
        tried = []
        for second, text in zip(still, await self._in_time(calls), strict=True):
            if text is None:
                continue
            flags = self._check(req, req.texts[second.index], text, "stop")
            if policy.better(verdicts.flags[second.index], flags):
                verdicts.flags[second.index] = flags
                verdicts.fused += 1
                # The Chimera's tokens are its own pool's; the second's were counted with the second.
                tried.append(Second(second.index, Generation(text, 0, 0, "stop"), text, (), kept=True))
                seconds[seconds.index(second)] = dataclasses.replace(second, kept=False)
        return seconds + tried

    async def _in_time(self, calls: Sequence[Awaitable[T]]) -> list[T | None]:
        """Each call's result, all at once; None for one not done qa_retry_reserve_s before the request's
        deadline (deadline.CURRENT), or by the deadline's cut, or failed: cancelled then, as a retry past
        the deadline would lose the answers in hand to a 504, and a failed one is no reason to."""
        if not calls:
            return []
        tasks = [asyncio.ensure_future(call) for call in calls]
        try:
            await _waited(tasks, deadline.CURRENT.get(), self.cfg.qa_retry_reserve_s)
        finally:  # also when this request is cancelled (its client left, its deadline passed)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return [_result(task) for task in tasks]

    def _check(self, req: TranslateRequest, source: str, result: str, reason: str | None) -> list[Flag]:
        return check(Answer(source, result, req.source.code, req.target.code, reason), self.cfg)

    def _second_sampling(self, sampling: Sampling) -> Sampling:
        """The retry's sampling: the request's drawn again; a greedy request's at qa_retry_temperature,
        since greedy decoding would give the same answer."""
        if sampling.temperature > 0:
            return sampling
        return dataclasses.replace(sampling, temperature=self.cfg.qa_retry_temperature)


async def _waited(
    tasks: Sequence[asyncio.Future[Any]], due: deadline.Deadline | None, reserve_s: float
) -> None:
    """Until every task is done, the deadline less reserve_s has passed, or the deadline cuts the retry."""
    if due is None:
        await asyncio.wait(tasks)
        return
    every = asyncio.ensure_future(asyncio.wait(tasks))
    cut = asyncio.ensure_future(due.cut.wait())
    try:
        with due.retry():
            await asyncio.wait({every, cut}, timeout=due.left(reserve_s), return_when=asyncio.FIRST_COMPLETED)
    finally:
        every.cancel()
        cut.cancel()


def _result(task: asyncio.Future[T]) -> T | None:
    """A retry's answer; None when it was cut, or failed (its first answer stands, said in the log)."""
    if not task.done() or task.cancelled():
        return None
    if (err := task.exception()) is not None:
        _log.warning("a retry's engine call failed; the first answer stands: %r", err)
        return None
    return task.result()


def per_text(parts: Sequence[Sequence[str | int]], units: Sequence[Sequence[Flag]]) -> list[list[Flag]]:
    """Each text's failed checks from those of the units it was cut into (an int in its parts names a
    unit): every check once per text, with the first unit's detail."""
    texts = []
    for pieces in parts:
        found: dict[str, Flag] = {}
        for piece in pieces:
            if isinstance(piece, int):
                for flag in units[piece]:
                    found.setdefault(flag.check, flag)
        texts.append(list(found.values()))
    return texts

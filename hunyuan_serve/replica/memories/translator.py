"""The translation core with the memories in front: exact matches answered, close ones in the prompt."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field

from hunyuan_serve.cache.layers import TranslationCache
from hunyuan_serve.families.base import CONTEXT, GLOSSARY, Features
from hunyuan_serve.families.build import FAMILY_FEATURES, prompt_for
from hunyuan_serve.languages import AUTO
from hunyuan_serve.memory.similar import Match
from hunyuan_serve.qa import policy
from hunyuan_serve.qa.flags import Flag
from hunyuan_serve.replica.admission.gated_engine import GatedEngine
from hunyuan_serve.replica.admission.priority import Caller
from hunyuan_serve.replica.memories import use as memory_use
from hunyuan_serve.replica.memories.recall import PairIndex, Recall, owners_of
from hunyuan_serve.replica.memories.use import EXACT, FUZZY, MISS
from hunyuan_serve.replica.metrics import Metrics
from hunyuan_serve.replica.outcome import Outcome, StreamStart
from hunyuan_serve.replica.review import Review, Verdicts
from hunyuan_serve.replica.schema import TranslateRequest
from hunyuan_serve.replica.service import Translator
from hunyuan_serve.storage.backend import StoreUnavailable

# Each close match in the context prompt, one a line: the terminology prompts' own "X 翻译成 Y" /
# "X translates to Y" lines say the same, and a line of this form reads the same way in a context.
CONTEXT_LINE = "{source} => {target}"
logger = logging.getLogger(__name__)


@dataclass
class _Plan:
    """One core call's close matches per text, and which of them went into the prompt."""

    guides: list[list[Match]]
    applied: list[bool] = field(default_factory=list)
    unguided: str = ""
    read: bool = False  # _features built the prompt from it (a long text's segments are built apart)


class MemoryTranslator(Translator):
    """Translator.translate with the memories looked up first (every API's texts come through here):
    texts with an exact match are answered from it, before the cache and without the engine; the
    others go on, each with its close matches in the family's terminology or context prompt."""

    def __init__(
        self,
        engine: GatedEngine,
        family: str,
        cache: TranslationCache,
        metrics: Metrics,
        review: Review | None,
        recall: Recall,
        segment_tokens: int | None = None,
    ) -> None:
        super().__init__(engine, family, cache, metrics, review, segment_tokens)
        self.recall = recall
        self._plans: dict[int, _Plan] = {}  # by id() of the request in translation: _features reads it

    async def translate(self, req: TranslateRequest, caller: Caller) -> Outcome:
        indexes = await self._indexes(req, caller)
        if not indexes:  # no memory of this pair for this caller
            return await super().translate(req, caller)
        return await self._remembered(req, caller, indexes)

    async def _remembered(self, req: TranslateRequest, caller: Caller, indexes: list[PairIndex]) -> Outcome:
        hits = self.recall.exact(indexes, req.texts)
        rest = [i for i, text in enumerate(req.texts) if text not in hits]
        plan = _Plan(await self.recall.fuzzy(indexes, [req.texts[i] for i in rest]))
        plan.applied = [False] * len(rest)
        outcome = Outcome()
        if rest:
            sub = (
                req if len(rest) == len(req.texts) else dataclasses.replace(req, texts=_pick(req.texts, rest))
            )
            self._plans[id(sub)] = plan
            try:
                outcome = await super().translate(sub, caller)
            finally:
                del self._plans[id(sub)]
        merged = _merged(req, hits, rest, outcome, self.review.policy(req.qa))
        results = [EXACT] * len(req.texts)
        for k, index in enumerate(rest):
            results[index] = FUZZY if plan.applied[k] else MISS
        return self._noted(merged, results, plan.unguided)

    async def stream_start(self, req: TranslateRequest, caller: Caller) -> StreamStart:
        """A stream's one text: answered whole where the memory holds it, else streamed with its close
        matches in the prompt, as translate() would send it. A text long enough to be cut streams as
        before: its segments' prompts are built apart, and say nothing of the memory."""
        indexes = await self._indexes(req, caller)
        if not indexes:
            return await super().stream_start(req, caller)
        if all(text in self.recall.exact(indexes, req.texts) for text in req.texts):
            return StreamStart(whole=await self._remembered(req, caller, indexes))
        plan = _Plan(await self.recall.fuzzy(indexes, list(req.texts)))
        plan.applied = [False] * len(req.texts)
        self._plans[id(req)] = plan
        try:  # the prompt is built (and _features reads the plan) before the generator is returned
            start = await super().stream_start(req, caller)
        finally:
            del self._plans[id(req)]
        if plan.read:
            start.memory, start.memory_unguided = [FUZZY if a else MISS for a in plan.applied], plan.unguided
            self._record(start.memory, plan.unguided)
        return start

    async def _indexes(self, req: TranslateRequest, caller: Caller) -> list[PairIndex]:
        # An ensemble's answer is its fusion, and an unknown source has no memory pair to look in.
        if not self.recall.enabled or req.ensemble or req.source is AUTO:
            return []
        try:
            return await self.recall.indexes(owners_of(caller.key), (req.source.code, req.target.code))
        except StoreUnavailable as err:  # the memory is help, not a condition: the model answers
            logger.warning("translation memory unavailable, translating without it: %s", err)
            return []

    def _noted(self, outcome: Outcome, results: list[str], unguided: str) -> Outcome:
        outcome.memory, outcome.memory_unguided = results, unguided
        self._record(results, unguided)
        return outcome

    def _record(self, results: list[str], unguided: str) -> None:
        """Counted, and told the request (its X-Hunyuan-Memory and log line: memories/use.py)."""
        self.recall.count(results)
        use = memory_use.CURRENT.get()
        if use is not None:
            use.results.extend(results)
            use.unguided = use.unguided or unguided

    def _features(self, req: TranslateRequest) -> list[Features]:
        features = super()._features(req)
        plan = self._plans.get(id(req))
        if plan is None:
            return features
        plan.read = True
        guided = []
        for k, (text, each, matches) in enumerate(zip(req.texts, features, plan.guides, strict=True)):
            if matches:
                made, why = self._guided(req, text, each, matches)
                plan.applied[k] = made is not None
                plan.unguided = plan.unguided or why
                each = made or each
            guided.append(each)
        return guided

    def _guided(
        self, req: TranslateRequest, text: str, features: Features, matches: list[Match]
    ) -> tuple[Features | None, str]:
        """The text's features with as many of its best matches as the token budget holds, or why none."""
        has = FAMILY_FEATURES[self.family]
        pairs = [(m.source, m.target) for m in matches]
        counts = range(len(pairs), 0, -1)  # as many as fit: the least alike are left out first
        if features.style or features.preserve_format:
            return None, "no prompt of any family has close matches together with style or preserve_format"
        if GLOSSARY in has and not features.context:
            made = [dataclasses.replace(features, terms=features.terms + tuple(pairs[:n])) for n in counts]
        elif CONTEXT in has and not features.terms:
            lines = [CONTEXT_LINE.format(source=s, target=t) for s, t in pairs]
            given = [features.context] if features.context else []
            made = [dataclasses.replace(features, context="\n".join(given + lines[:n])) for n in counts]
        else:
            return None, f"prompt family {self.family} has no terminology or context prompt for close matches"
        limit = self.engine.max_model_len - req.sampling.max_tokens
        for each in made:
            prompt = prompt_for(self.family, req.source, req.target, text, each)
            if self.engine.count_prompt_tokens(prompt) <= limit:
                return each, ""
        return None, "no close match fits the prompt's token budget"


def _pick(texts: tuple[str, ...], indexes: list[int]) -> tuple[str, ...]:
    return tuple(texts[i] for i in indexes)


def _merged(
    req: TranslateRequest, hits: dict[str, str], rest: list[int], outcome: Outcome, checks: str
) -> Outcome:
    """The whole request's outcome: the memory's targets where it had them, the core's answers between."""
    if len(rest) == len(req.texts):
        return outcome
    n = len(req.texts)
    merged = dataclasses.replace(outcome, results=[hits.get(t, "") for t in req.texts])
    merged.cached = [False] * n
    merged.format_lost = [()] * n if req.preserve_format else []
    flags: list[list[Flag]] = [[] for _ in range(n)]
    for k, index in enumerate(rest):
        merged.results[index], merged.cached[index] = outcome.results[k], outcome.cached[k]
        if req.preserve_format:
            merged.format_lost[index] = outcome.format_lost[k]
        if outcome.verdicts.flags:
            flags[index] = list(outcome.verdicts.flags[k])
    verdicts = outcome.verdicts if rest else Verdicts(checks)
    merged.verdicts = dataclasses.replace(verdicts, flags=flags if verdicts.policy != policy.OFF else [])
    return merged

"""Translation between HTTP and engine: prompts, token budget, cache, and coalescing of identical requests."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import itertools
import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from hunyuan_serve.cache.key import cache_key, key_prefix, keyed_text
from hunyuan_serve.cache.layers import TranslationCache
from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.families import format_tags
from hunyuan_serve.families.base import Features, FeatureUnsupported, Prompt, PromptInputError
from hunyuan_serve.families.build import canonical_family, check_features, prompt_for
from hunyuan_serve.families.glossary import terms_in_text
from hunyuan_serve.languages import AUTO
from hunyuan_serve.replica import ensemble, segmenting, turns
from hunyuan_serve.replica.admission.gated_engine import GatedEngine, Ticket, ticket_of
from hunyuan_serve.replica.admission.priority import Caller
from hunyuan_serve.replica.answers import cache_entry, from_cache
from hunyuan_serve.replica.engine.interface import Delta, Generation, Sampling
from hunyuan_serve.replica.errors import ApiError, FeatureRefused
from hunyuan_serve.replica.metrics import Metrics
from hunyuan_serve.replica.outcome import Completion, Outcome, StreamStart
from hunyuan_serve.replica.review import Review
from hunyuan_serve.replica.schema import TranslateRequest


@dataclass
class _Shared:
    task: asyncio.Task[Generation]
    ticket: Ticket  # its class: the highest of its waiters'
    key: str = ""  # its entry in Translator._inflight
    waiters: int = 0


class Translator:
    """Turns validated requests into engine calls; every text of a batch goes to the engine at once."""

    def __init__(
        self,
        engine: GatedEngine,
        family: str,
        cache: TranslationCache,
        metrics: Metrics,
        review: Review | None = None,
        segment_tokens: int | None = None,
    ) -> None:
        self.engine = engine
        self.family = canonical_family(family)
        self.segment_tokens = segment_tokens  # None: the family's target (replica/segmenting.py)
        self.cache = cache
        self.metrics = metrics
        self.review = review or Review(QaSettings(), metrics)
        self._inflight: dict[str, _Shared] = {}
        self._ids = itertools.count()

    def _check_budget(self, prompt_tokens: list[int], req: TranslateRequest) -> None:
        sampling = req.sampling
        limit = self.engine.max_model_len - sampling.max_tokens
        for index, count in enumerate(prompt_tokens):
            if count > limit:
                where = f"texts[{index}]" if req.batch else "text"
                # The whole prompt counts: a long context is the likeliest cause, so say it is included.
                code, part = "text_too_long", ""
                if req.context:
                    code, part = "context_too_long", f" with its context ({len(req.context)} characters)"
                raise ApiError(
                    413,
                    code,
                    f"{where}{part} makes a prompt of {count} tokens; the limit is {limit} tokens "
                    f"(max_model_len {self.engine.max_model_len} minus max_tokens {sampling.max_tokens}); "
                    "the prompt counts the template, glossary terms and context as well as the text",
                )

    def _features(self, req: TranslateRequest) -> list[Features]:
        """Each text's instructions: the request's, with only the glossary terms that occur in the text."""
        return [
            Features(terms_in_text(req.glossary, text), req.context, req.style, req.preserve_format)
            for text in req.texts
        ]

    def _prompts(self, req: TranslateRequest, features: list[Features]) -> list[Prompt]:
        """The family's prompt per text; a field the family has no template for is a 400 for the request,
        whether or not a glossary term occurs in a given text (so the answer does not depend on the text)."""
        if req.source is AUTO:  # replica.apis.compat resolves it first; a path that does not says so
            raise ApiError(400, "source_required", "source_lang is required here (no auto-detection)")
        try:
            check_features(self.family, req.asked())
            return [
                prompt_for(self.family, req.source, req.target, text, each)
                for text, each in zip(req.texts, features, strict=True)
            ]
        except FeatureUnsupported as err:
            raise FeatureRefused(err) from None
        except PromptInputError as err:
            raise ApiError(400, "invalid_request", str(err)) from None

    def _key(self, req: TranslateRequest, text: str, features: Features, sampling: dict[str, Any]) -> str:
        """The cache (and coalescing) key: every field that changes the prompt or the answer's reading."""
        return keyed_text(self._prefix(req, features, sampling), text)

    def _keys(self, req: TranslateRequest, features: list[Features], sampling: dict[str, Any]) -> list[str]:
        """_key of every text; the fields they share are encoded once per set of instructions."""
        prefixes: dict[Features, str] = {}
        keys = []
        for text, each in zip(req.texts, features, strict=True):
            prefix = prefixes.get(each)
            if prefix is None:
                prefix = prefixes[each] = self._prefix(req, each, sampling)
            keys.append(keyed_text(prefix, text))
        return keys

    def _prefix(self, req: TranslateRequest, features: Features, sampling: dict[str, Any]) -> str:
        instructions: dict[str, Any] = {"family": self.family}
        if features.used():
            instructions.update(
                terms=[list(term) for term in features.terms],
                context=features.context,
                style=features.style,
                preserve_format=features.preserve_format,
            )
        return key_prefix(
            self.engine.model_name, req.source.code, req.target.code, sampling, instructions, req.ensemble
        )

    async def stream_start(self, req: TranslateRequest, caller: Caller) -> StreamStart:
        """A stream's start: here always stream_translation's deltas (a translation memory may answer
        whole, or guide the model: replica/memories/translator.py). Checks as stream_translation."""
        return StreamStart(deltas=self.stream_translation(req, caller))

    async def translate(self, req: TranslateRequest, caller: Caller) -> Outcome:
        """Every text's answer: a long text's segments translated as one batch and joined."""
        segmented = await segmenting.segmented_in_turns(self.engine, self.family, self.segment_tokens, req)
        if segmented is None:
            return await self._translate(req, caller)
        return await segmented.translated(self._translate, caller)

    async def _translate(self, req: TranslateRequest, caller: Caller) -> Outcome:
        features = self._features(req)
        prompts = self._prompts(req, features)
        counts = await turns.mapped(self.engine.count_prompt_tokens, prompts)
        self._check_budget(counts, req)
        sampling = req.sampling.as_dict()
        keys = self._keys(req, features, sampling)
        answers = await self._answer_all(keys, prompts, req.sampling, caller, req.ensemble or 1)
        outcome = Outcome(results=[a.generation.text for a in answers], cached=[a.cached for a in answers])
        if req.ensemble:  # each text's answer is its candidates, as _run wrote them (or the cache kept them)
            outcome.candidates = [json.loads(text) for text in outcome.results]
            outcome.results = [each[0] for each in outcome.candidates]
        for answer in answers:
            generation = answer.generation  # a cached answer counts its tokens as first answered, and 0 s
            outcome.prompt_tokens += generation.prompt_tokens
            outcome.output_tokens += generation.output_tokens
            outcome.queue_s = max(outcome.queue_s, generation.queue_s)
            outcome.engine_s = max(outcome.engine_s, generation.engine_s)
        if req.preserve_format:
            _restore_markup(req.texts, outcome)
        if not req.ensemble:  # an ensemble's answer is its fusion: checked once fused (apis/native, compat)
            await self._review(req, prompts, keys, answers, outcome, caller)
        return outcome

    async def _review(
        self,
        req: TranslateRequest,
        prompts: list[Prompt],
        keys: list[str],
        answers: list[Completion],
        outcome: Outcome,
        caller: Caller,
    ) -> None:
        """The answers checked as the policy says; under retry, a flagged text's better second answer
        replaces the first, in the answer and in the cache (an identical request then gets it)."""
        reasons = [answer.generation.finish_reason for answer in answers]
        verdicts = outcome.verdicts = await self.review.judged(req, outcome.results, reasons)
        first = list(outcome.results)
        again = functools.partial(self._run, ticket=ticket_of(caller))
        for second in await self.review.retry(again, req, prompts, verdicts, caller.request_id, first):
            outcome.prompt_tokens += second.generation.prompt_tokens
            outcome.output_tokens += second.generation.output_tokens
            if second.kept:
                outcome.results[second.index] = second.text
                if req.preserve_format:
                    outcome.format_lost[second.index] = second.lost
                if (entry := cache_entry(second.generation)) is not None:
                    self.cache.put(keys[second.index], entry)
        self.review.count(verdicts.flags)

    async def _answer_all(
        self, keys: list[str], prompts: list[Prompt], sampling: Sampling, caller: Caller, n: int = 1
    ) -> list[Completion]:
        """Every prompt at once, each from the cache, an identical call in flight, or the engine."""
        answers: list[Completion | None] = [None] * len(prompts)
        joined: list[tuple[int, _Shared, bool]] = []
        hits = await self.cache.get_many(keys)  # one lookup for the batch
        for index, (key, prompt, hit) in enumerate(zip(keys, prompts, hits, strict=True)):
            await turns.turn(index)
            cached = from_cache(hit)
            if hit is not None and cached is not None:
                answers[index] = Completion(cached, cached=True)
                self.metrics.cache_hits.labels(layer=hit[1]).inc()
                continue
            self.metrics.cache_misses.inc()
            engine_id = f"{caller.request_id}-{index}-{next(self._ids)}"
            joined.append((index, *self._join(key, prompt, sampling, engine_id, caller, n)))
        done = await self._wait_all([shared for _, shared, _ in joined])
        fresh: dict[str, str] = {}
        for (index, _, coalesced), generation in zip(joined, done, strict=True):
            await turns.turn(index)
            answers[index] = Completion(generation, cached=False)
            entry = cache_entry(generation)
            if not coalesced and entry is not None:
                fresh[keys[index]] = entry
        self.cache.put_many(fresh)  # one write for the batch, off the request's path
        return [answer for answer in answers if answer is not None]

    def _join(
        self, key: str, prompt: Prompt, sampling: Sampling, engine_id: str, caller: Caller, n: int = 1
    ) -> tuple[_Shared, bool]:
        """The engine call in flight for this key (coalesced: True), or a new one; one more waiter on it,
        whose class the call takes when higher (a person's string that a bulk job asked for first).

        One task per engine call and none per waiter: a batch's texts are awaited together (_wait_all).
        """
        shared = self._inflight.get(key)
        coalesced = shared is not None
        if shared is None:
            ticket = ticket_of(caller)
            task = asyncio.create_task(self._run(prompt, sampling, engine_id, n, ticket))
            shared = _Shared(task, ticket, key)
            self._inflight[key] = shared
            shared.task.add_done_callback(functools.partial(self._forget, key, shared))
        else:
            self.metrics.coalesced.inc()
            shared.ticket.join(caller.cls)
        shared.waiters += 1
        return shared, coalesced

    async def _wait_all(self, joined: list[_Shared]) -> list[Generation]:
        """Each call's generation; if this request leaves (cancelled, or one call failed), the calls it
        alone waits for are cancelled (an abort each), while those others also wait for go on."""
        try:
            # Never cancelled from here: one waiter leaving must not cancel the call the others wait for.
            return await turns.results([shared.task for shared in joined])
        except BaseException:
            # A batch may hold one text twice: this request is then several of a call's waiters.
            ours = collections.Counter(id(shared) for shared in joined)
            for shared in {id(shared): shared for shared in joined}.values():
                if shared.waiters == ours[id(shared)] and not shared.task.done():
                    # Out of the table first: an identical request arriving while the engine aborts
                    # must start a call of its own, not join this one and get its cancellation.
                    self._forget(shared.key, shared, None)
                    shared.task.cancel()
                    self.metrics.aborts.inc()
            raise
        finally:
            for shared in joined:
                shared.waiters -= 1

    async def _run(
        self, prompt: Prompt, sampling: Sampling, engine_id: str, n: int = 1, ticket: Ticket | None = None
    ) -> Generation:
        ticket = ticket or Ticket()
        if n > 1:
            samples = await self.engine.sample(prompt, sampling, engine_id, n, ticket)
            generation = ensemble.candidates_generation(samples)
        else:
            generation = await self.engine.generate(prompt, sampling, engine_id, ticket)
        self.metrics.prompt_tokens.inc(generation.prompt_tokens)
        self.metrics.generation_tokens.inc(generation.output_tokens)
        self.metrics.engine_latency.observe(generation.engine_s)
        return generation

    def _forget(self, key: str, shared: _Shared, _task: object) -> None:
        if self._inflight.get(key) is shared:
            del self._inflight[key]

    # Prompts as a client wrote them (OpenAI's chat and completions) and streams: beside translate().

    def check_prompt(self, prompt: Prompt, sampling: Sampling, where: str) -> None:
        """A 413 naming `where` when the prompt and max_tokens do not fit the model's context."""
        count = self.engine.count_prompt_tokens(prompt)
        limit = self.engine.max_model_len - sampling.max_tokens
        if count > limit:
            raise ApiError(
                413,
                "context_length_exceeded",
                f"{where} makes a prompt of {count} tokens; the limit is {limit} tokens "
                f"(max_model_len {self.engine.max_model_len} minus max_tokens {sampling.max_tokens})",
            )

    def _prompt_key(self, prompt: Prompt, sampling: Sampling) -> str:
        """The cache key of a prompt sent as-is: its whole text and stops, not languages."""
        text = json.dumps([list(prompt.messages), prompt.text, list(prompt.stop)], ensure_ascii=False)
        return cache_key(self.engine.model_name, "", "", text, sampling.as_dict(), {"as_sent": True})

    async def complete(self, prompts: list[Prompt], sampling: Sampling, caller: Caller) -> list[Completion]:
        """Each prompt as sent (checked with check_prompt first), all at once: cache, coalescing, metrics."""
        keys = [self._prompt_key(prompt, sampling) for prompt in prompts]
        return await self._answer_all(keys, prompts, sampling, caller)

    def stream_translation(self, req: TranslateRequest, caller: Caller) -> AsyncGenerator[Delta, None]:
        """translate() for one text, as it is generated; every check runs before the first delta. A long
        text's segments are translated as one batch, its answer sent whole."""
        segmented = segmenting.segmented(self.engine, self.family, self.segment_tokens, req)
        if segmented is not None:  # checked as translate() checks its segments, before the first delta
            with segmented.naming():
                units = self._prompts(segmented.request, self._features(segmented.request))
                self._check_budget([self.engine.count_prompt_tokens(p) for p in units], segmented.request)
            return segmenting.streamed(functools.partial(self.translate, req, caller))
        features = self._features(req)
        prompt = self._prompts(req, features)[0]
        self._check_budget([self.engine.count_prompt_tokens(prompt)], req)
        key = self._key(req, req.texts[0], features[0], req.sampling.as_dict())
        return self._stream(prompt, req.sampling, caller, key)

    def stream_prompt(
        self, prompt: Prompt, sampling: Sampling, caller: Caller, where: str
    ) -> AsyncGenerator[Delta, None]:
        """A prompt as sent, as it is generated; the budget is checked before the first delta."""
        self.check_prompt(prompt, sampling, where)
        return self._stream(prompt, sampling, caller, self._prompt_key(prompt, sampling))

    async def _stream(
        self, prompt: Prompt, sampling: Sampling, caller: Caller, key: str
    ) -> AsyncGenerator[Delta, None]:
        # Never coalesced: each stream reads its own engine request. The final text is cached.
        hit = await self.cache.get(key)
        cached = from_cache(hit)
        if hit is not None and cached is not None:
            self.metrics.cache_hits.labels(layer=hit[1]).inc()
            yield Delta(cached.text)
            yield Delta("", cached, cached=True)
            return
        self.metrics.cache_misses.inc()
        final: Generation | None = None
        engine_id = f"{caller.request_id}-s{next(self._ids)}"
        try:
            async with contextlib.aclosing(
                self.engine.stream(prompt, sampling, engine_id, ticket_of(caller))
            ) as deltas:
                async for delta in deltas:
                    final = delta.final or final
                    yield delta
        finally:
            if final is None:
                self.metrics.aborts.inc()
        if final is None:
            return
        self.metrics.prompt_tokens.inc(final.prompt_tokens)
        self.metrics.generation_tokens.inc(final.output_tokens)
        self.metrics.engine_latency.observe(final.engine_s)
        if (entry := cache_entry(final)) is not None:
            self.cache.put(key, entry)


def _restore_markup(texts: tuple[str, ...], outcome: Outcome) -> None:
    """The answers' <target> bodies with each text's markup put back in place of its <sN> tags.

    The cache holds the model's own answer, so a hit is read the same way. A tag pair that did not come
    back intact is dropped (its text kept, without markup) and named in format_lost, never half-restored.
    """
    for index, text in enumerate(texts):
        restored = format_tags.unwrap(outcome.results[index], format_tags.wrap(text))
        outcome.results[index] = restored.text
        outcome.format_lost.append(restored.lost)

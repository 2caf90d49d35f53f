"""Translate a document's segments through the service: cache first, batches, checks, a summary."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hunyuan_serve.families.format_tags import wrap
from hunyuan_serve.localization.answers import QaFlag, TranslateError, Translation
from hunyuan_serve.localization.batches import Progress
from hunyuan_serve.localization.glossary import FixedTerms
from hunyuan_serve.localization.resplit import complete, own_checks
from hunyuan_serve.localization.segments import (
    Action,
    Plan,
    check_translation,
    finish,
    plan_segment,
    remembered,
)
from hunyuan_serve.localization.service import Service
from hunyuan_serve.localization.store import TranslationStore, cache_profile
from hunyuan_serve.localization.summary import Failure, Flagged, Summary

_Send = Callable[[list[str]], Awaitable[list[Translation]]]  # one batch request, all else bound
# Statuses that blame one text of a batch, not the service: those texts are retried one by one.
_PER_TEXT_STATUSES = (400, 413, 422)


@dataclass
class _Run:
    """Mutable state of one run: what came back, what went wrong."""

    results: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    flags: dict[str, tuple[QaFlag, ...]] = field(default_factory=dict)  # the suspect ones' checks
    memory: set[str] = field(default_factory=set)  # texts the service answered from its memory
    requests: int = 0
    aborted: str | None = None


@dataclass
class _Group:
    """The segments that share one context (and formatting): one request profile, one cache key space."""

    context: str | None
    indexes: list[int]
    plans: list[Plan]
    first_plan: dict[str, Plan]
    formatted: bool = False  # sent with preserve_format: the family's formatted-translation prompt
    profile: str = ""
    cached: dict[str, str] = field(default_factory=dict)
    to_send: list[str] = field(default_factory=list)
    run: _Run = field(default_factory=lambda: _Run())


@dataclass(frozen=True)
class _Request:
    """What goes with every batch of a run besides its texts and a group's context."""

    target: str
    source: str | None
    options: dict[str, Any]  # sampling, and the QA policy asked for
    glossary: dict[str, str] | None
    style: str | None
    qa: str | None  # the policy asked for (flag, retry: a service that sends no checks gets the
    # client's own line count)


async def localize(
    segments: Sequence[str],
    labels: Sequence[str],
    service: Service,
    target: str,
    source: str | None = None,
    *,
    glossary: FixedTerms | None = None,
    terms: Mapping[str, str] | None = None,
    store: TranslationStore | None = None,
    options: Mapping[str, Any] | None = None,
    context: str | None = None,
    contexts: Sequence[str | None] | None = None,
    style: str | None = None,
    formatted: Sequence[bool] | None = None,
    qa: str | None = None,
    on_total: Callable[[int], None] | None = None,
    progress: Progress | None = None,
    memory: Mapping[str, str] | None = None,
) -> tuple[list[str], Summary]:
    """Translated segments (failed ones left as they were) and the summary of the run.

    options (sampling), context, style and terms (the request's glossary field, for a model with its
    own terminology prompt; `glossary` is applied here) go with every batch and into the cache key.
    contexts, when given, is each segment's own context (gettext msgctxt) in place of `context`:
    segments are batched per context, all groups at once. Accepted translations are committed to the
    store batch by batch, so an interrupted run loses only the batches in flight and the next run
    resumes from there. formatted, when given, marks the segments whose inline markup goes through the
    family's formatted-translation prompt (`preserve_format`); only where no other instruction is sent
    (no published prompt combines two), and their markup must come back whole. qa is the QA policy
    asked of the service (off, flag, retry; None: the service's own): a flagged translation is used
    but never cached, and listed in the summary; one that lost part of its text is split and re-sent.
    memory (source -> target, a translation memory file's units for this pair) answers a text whose
    exact source it holds, before the cache and without a request, as the service's memory does.
    """
    plans = [remembered(plan_segment(segment, glossary), dict(memory or {})) for segment in segments]
    if source:  # the service's memory is per language pair: an unknown source has none
        plans = await _service_memory(service, plans, source, target)
    flags = list(formatted) if formatted and not (terms or style) else [False] * len(plans)
    groups = _groups(plans, [context] * len(plans) if contexts is None else list(contexts), flags)
    fields = {**(options or {}), "style": style, "glossary": dict(terms) if terms else None}
    await _look_up(groups, service, store, fields, source, target)
    total = sum(len(group.to_send) for group in groups)
    if on_total is not None:
        on_total(total)
    request = _Request(
        target, source, {**(options or {}), **({"qa": qa} if qa else {})}, fields["glossary"], style, qa
    )
    reporter = _reporters(len(groups), total, progress)
    await asyncio.gather(
        *(_send_group(service, group, store, request, reporter(n)) for n, group in enumerate(groups))
    )
    return _merge(groups, labels, len(plans))


async def _service_memory(service: Service, plans: list[Plan], source: str, target: str) -> list[Plan]:
    """The segments the service's memory holds whole, as the file has them (the spaces around them, a
    symbol alone, which the requests sent trim or skip), answered from it as --memory's file is."""
    asked = [p.source for p in plans if p.action is not Action.MEMORY and p.source.strip()]
    found = await service.memory_lookup(list(dict.fromkeys(asked)), target, source)
    return [remembered(plan, found) for plan in plans] if found else plans


def _reporters(count: int, total: int, progress: Progress | None) -> Callable[[int], Progress]:
    """Per group, the progress callback that reports the texts done over all groups."""
    done = dict.fromkeys(range(count), 0)

    def reporter(number: int) -> Progress:
        def report(count: int, _: int) -> None:
            done[number] = count
            if progress is not None:
                progress(sum(done.values()), total)

        return report

    return reporter


async def _send_group(
    service: Service,
    group: _Group,
    store: TranslationStore | None,
    request: _Request,
    progress: Progress,
) -> None:
    translate: _Send = functools.partial(
        service.translate_texts,
        target=request.target,
        source=request.source,
        options=_with_format(request.options, group.formatted),
        glossary=request.glossary,
        context=group.context,
        style=request.style,
    )

    async def checked(texts: list[str]) -> list[Translation]:
        return [own_checks(answer) for answer in await translate(texts)]

    send = checked if request.qa in ("flag", "retry") else translate
    await service.map_batches(
        group.to_send, functools.partial(_send, send, group, store, request.source, request.target), progress
    )


async def _look_up(
    groups: Sequence[_Group],
    service: Service,
    store: TranslationStore | None,
    fields: Mapping[str, Any],
    source: str | None,
    target: str,
) -> None:
    """Each group's cache profile, what the cache already holds, and what is left to send."""
    model = await service.served_model() if store is not None else None
    for group in groups:
        if store is not None:  # not `if store`: an empty store is falsy (it has a length)
            group.profile = cache_profile(
                model, {**_with_format(fields, group.formatted), "context": group.context}
            )
            group.cached = store.get_many(group.profile, source, target, group.first_plan)
        group.to_send = [text for text in group.first_plan if text not in group.cached]


def _groups(plans: Sequence[Plan], contexts: Sequence[str | None], formatted: Sequence[bool]) -> list[_Group]:
    by_context: dict[tuple[str | None, bool], _Group] = {}
    for index, (plan, ctx, flag) in enumerate(zip(plans, contexts, formatted, strict=True)):
        key = (ctx or None, flag and not ctx)  # a context is an instruction of its own
        group = by_context.setdefault(key, _Group(key[0], [], [], {}, key[1]))
        group.indexes.append(index)
        group.plans.append(plan)
    for group in by_context.values():
        group.first_plan = _distinct_requests(group.plans)
    return list(by_context.values())


async def _send(
    send: _Send,
    group: _Group,
    store: TranslationStore | None,
    source: str | None,
    target: str,
    batch: list[str],
) -> None:
    # The service hands out a batch only when a worker is free: once the service is given up on,
    # every batch still waiting ends here, unsent.
    run = group.run
    if run.aborted:
        return
    answers = await _completed(send, await _translate_chunk(send, batch, run), run)
    got = {text: answer.result for text, answer in answers.items()}
    if group.formatted:
        got = _markup_kept(got, run)
    run.flags.update({text: answer.qa for text, answer in answers.items() if answer.qa})
    run.memory.update(text for text, answer in answers.items() if answer.memory == "exact")
    # A suspect translation is not cached: the next run asks again rather than reuse it unflagged; nor
    # is the memory's, which people may correct there: the next run asks the memory again.
    good = {
        text: out
        for text, out in got.items()
        if not check_translation(group.first_plan[text], out)
        and text not in run.flags
        and text not in run.memory
    }
    run.results.update(got)
    if store is not None and good:
        store.put_many(group.profile, source, target, good)


async def _completed(send: _Send, answers: dict[str, Translation], run: _Run) -> dict[str, Translation]:
    """The answers, each that lost lines, sentences or paragraphs replaced by its text split and re-sent."""
    done = await asyncio.gather(*(complete(send, answer) for answer in answers.values()))
    run.requests += sum(sent for _, sent in done)
    return {text: answer for text, (answer, _) in zip(answers, done, strict=True)}


def _with_format(fields: Mapping[str, Any] | None, formatted: bool) -> dict[str, Any]:
    """The request's fields, with preserve_format for a formatted group (it rides with the options)."""
    return {**(fields or {}), **({"preserve_format": True} if formatted else {})}


def _markup_kept(got: dict[str, str], run: _Run) -> dict[str, str]:
    """The translations whose markup came back whole; the others recorded as failed, saying which.

    The service drops a tag pair the model lost (and says so in format_lost): the text is kept, the
    markup gone, which the placeholder check alone would not see for Markdown emphasis.
    """
    kept: dict[str, str] = {}
    for text, out in got.items():
        lost = Counter(wrap(text).markup) - Counter(wrap(out).markup)
        if lost:
            run.errors[text] = "markup lost: " + " ".join("".join(pair) for pair in lost.elements())
        else:
            kept[text] = out
    return kept


def _merge(groups: Sequence[_Group], labels: Sequence[str], count: int) -> tuple[list[str], Summary]:
    """Every group's outcomes back in segment order, and one summary."""
    texts: list[str] = [""] * count
    summary = Summary(total=count)
    for group in groups:
        got, part = _outcomes(group.plans, [labels[i] for i in group.indexes], group.cached, group.run)
        for position, index in enumerate(group.indexes):
            texts[index] = got[position]
        summary.failed_at.extend(group.indexes[i] for i in part.failed_at)
        summary.memory_at.extend(group.indexes[i] for i in part.memory_at)
        summary.machine_at.extend(group.indexes[i] for i in part.machine_at)
        for name in ("translated", "cached", "memory", "skipped", "failed", "requests"):
            setattr(summary, name, getattr(summary, name) + getattr(part, name))
        summary.aborted = summary.aborted or part.aborted
        summary.failures.extend(part.failures)
        summary.flagged.extend(dataclasses.replace(f, index=group.indexes[f.index]) for f in part.flagged)
    summary.failed_at.sort()
    summary.memory_at.sort()
    summary.machine_at.sort()
    summary.flagged.sort(key=lambda f: f.index)
    return texts, summary


def _distinct_requests(plans: Sequence[Plan]) -> dict[str, Plan]:
    """Each text to send, once (a string used in many places is one request), with its first plan."""
    first_plan: dict[str, Plan] = {}
    for plan in plans:
        if plan.action is Action.SEND:
            first_plan.setdefault(plan.request, plan)
    return first_plan


async def _translate_chunk(translate: _Send, chunk: list[str], run: _Run) -> dict[str, Translation]:
    run.requests += 1
    try:
        return {t.text: t for t in await translate(chunk)}
    except TranslateError as err:
        if err.status not in _PER_TEXT_STATUSES:
            # Retries are spent or the service is gone: stop sending instead of waiting out every batch.
            run.aborted = run.aborted or f"service error: {err}"
            run.errors.update(dict.fromkeys(chunk, f"not translated: {err}"))
            return {}
        if len(chunk) == 1:
            run.errors[chunk[0]] = f"refused: {err.code}: {err.message}"
            return {}
    results: dict[str, Translation] = {}
    for text in chunk:
        results.update(await _translate_chunk(translate, [text], run))
    return results


def _outcomes(
    plans: Sequence[Plan], labels: Sequence[str], cached: Mapping[str, str], run: _Run
) -> tuple[list[str], Summary]:
    summary = Summary(total=len(plans), requests=run.requests, aborted=run.aborted)
    texts: list[str] = []
    for index, (plan, label) in enumerate(zip(plans, labels, strict=True)):
        if plan.action is not Action.SEND:
            texts.append(finish(plan, None).text)
            if plan.action is Action.MEMORY:
                summary.memory_at.append(index)
            summary.memory += plan.action is Action.MEMORY
            summary.skipped += plan.action is not Action.MEMORY
            continue
        from_cache = plan.request in cached
        from_memory = plan.request in run.memory and not from_cache
        translation = cached.get(plan.request, run.results.get(plan.request))
        error = run.errors.get(plan.request) or (f"not translated: {run.aborted}" if run.aborted else None)
        outcome = finish(plan, translation, error, checked=not from_memory)
        texts.append(outcome.text)
        if outcome.problem is not None:
            summary.failed += 1
            summary.failed_at.append(index)
            summary.failures.append(Failure(label, plan.source, outcome.problem))
        elif from_memory:
            summary.memory += 1
            summary.memory_at.append(index)
        elif from_cache:
            summary.cached += 1
            summary.machine_at.append(index)
        else:
            summary.translated += 1
            summary.machine_at.append(index)
            if plan.request in run.flags:
                flagged = Flagged(index, label, plan.source, outcome.text, run.flags[plan.request])
                summary.flagged.append(flagged)
    return texts, summary

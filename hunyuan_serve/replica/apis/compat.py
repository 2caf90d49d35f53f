"""What the LibreTranslate, DeepL and Immersive adapters share over the one core: bodies, sources, markup."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import urllib.parse
from collections.abc import AsyncGenerator, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import Response
from fastapi.responses import JSONResponse
from starlette.formparsers import MultiPartException, MultiPartParser

from hunyuan_serve import detect
from hunyuan_serve.families.base import PRESERVE_FORMAT
from hunyuan_serve.families.build import FAMILY_FEATURES
from hunyuan_serve.languages import AUTO, Language, find_language
from hunyuan_serve.qa.flags import Flag
from hunyuan_serve.replica import ensemble, review
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.outcome import Outcome
from hunyuan_serve.replica.schema import TranslateRequest, decode_body, parse_fields

_TAG = re.compile(r"<[^<>]*>")
_TAG_NAME = re.compile(r"<\s*(/?)\s*([A-Za-z][\w:.-]*)[^<>]*?(/?)\s*>")


async def read_fields(call: Call) -> dict[str, Any]:
    """The body as fields: JSON (an object), or a form (urlencoded or multipart; a repeated field a list)."""
    raw = await call.body()
    kind = call.request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json" or (not kind and raw.lstrip()[:1] == b"{"):
        return decode_body(raw)
    if kind == "multipart/form-data":
        return await _multipart(call, raw)
    try:
        pairs = urllib.parse.parse_qsl(
            raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False, errors="strict"
        )
    except UnicodeDecodeError as err:
        raise ApiError(400, "invalid_encoding", f"form body is not UTF-8 (byte {err.start})") from None
    return _grouped(pairs)


async def _multipart(call: Call, raw: bytes) -> dict[str, Any]:
    async def once() -> AsyncGenerator[bytes, None]:
        yield raw

    try:
        form = await MultiPartParser(call.request.headers, once()).parse()
    except MultiPartException as err:
        raise ApiError(400, "invalid_form", f"multipart body is malformed: {err.message}") from None
    pairs = []
    for key, value in form.multi_items():
        if not isinstance(value, str):
            raise ApiError(400, "invalid_form", f"field {key!r} is a file; send text fields")
        pairs.append((key, value))
    return _grouped(pairs)


def _grouped(pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, value in pairs:
        if key in fields:
            previous = fields[key]
            fields[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            fields[key] = value
    return fields


def query_or_form(call: Call, fields: dict[str, Any], key: str) -> Any:
    """A field from the URL's query, else from the body (clients send GET bodies: deepl, libretranslatepy)."""
    return call.request.query_params.get(key, fields.get(key))


@dataclass
class Translated:
    """Per text: the translation and the source it was translated from; the merged core outcome."""

    texts: list[str]
    sources: list[detect.Detection]
    outcome: Outcome = field(default_factory=Outcome)


def build_request(replica: ReplicaContext, fields: dict[str, Any]) -> TranslateRequest:
    """Native /translate fields (texts, source_lang, target_lang, context...) checked as /translate checks."""
    return parse_fields(fields, replica.cfg, replica.sampling, replica.engine.max_model_len)


def plain_text(text: str) -> str:
    """The text without its tags, for detection."""
    return _TAG.sub(" ", text)


def sources_of(
    replica: ReplicaContext, req: TranslateRequest, html: bool, by_script: bool
) -> list[detect.Detection]:
    """Each text's source: the request's, or detected (short texts take the batch's majority).

    by_script: a given Chinese source is told Simplified or Traditional by each text's script (DeepL's
    single ZH source code covers both).
    """
    texts = [plain_text(text) if html else text for text in req.texts]
    if req.source is AUTO:
        cfg = replica.cfg
        return detect.detect_texts(
            texts, cfg.detect_short_text_chars, cfg.detect_max_chars, cfg.detect_sure_confidence
        )
    if by_script and req.source.code in ("zh", "zh-Hant"):
        return [detect.Detection(find_language(detect.chinese_script(text)), 1.0) for text in texts]
    return [detect.Detection(req.source, 1.0) for _ in texts]


def _markup_in_core(replica: ReplicaContext, req: TranslateRequest, ignore_tags: frozenset[str]) -> bool:
    """The family's formatted-translation template, unless ignored tags hold text it would translate or
    the request asks for terms, context or style: no official template takes one of them with markup,
    so then the tags are kept as they are and the text between them gets the prompt that feature has."""
    if PRESERVE_FORMAT not in FAMILY_FEATURES[replica.translator.family] or req.asked().used():
        return False
    return not any(_ignored_text(text, ignore_tags) for text in req.texts)


def _ignored_text(text: str, ignore_tags: frozenset[str]) -> bool:
    pieces = _split(text, ignore_tags)
    return any(kind == "kept" and piece.strip() and not _TAG.fullmatch(piece) for kind, piece in pieces)


def _split(text: str, ignore_tags: frozenset[str]) -> list[tuple[str, str]]:
    """('text' | 'kept', piece) in order: tags and the inside of ignored elements are kept verbatim."""
    pieces: list[tuple[str, str]] = []
    depth = last = 0
    for match in _TAG.finditer(text):
        if match.start() > last:
            pieces.append(("kept" if depth else "text", text[last : match.start()]))
        pieces.append(("kept", match.group()))
        last = match.end()
        named = _TAG_NAME.fullmatch(match.group())
        if named and named.group(2).lower() in ignore_tags and not named.group(3):
            depth = max(0, depth - 1) if named.group(1) else depth + 1
    if last < len(text):
        pieces.append(("kept" if depth else "text", text[last:]))
    return pieces


@dataclass
class _Plan:
    """The units the core translates, each with its source, and how each text is put back together."""

    units: list[str] = field(default_factory=list)
    unit_sources: list[Language] = field(default_factory=list)
    parts: list[list[str | int]] = field(default_factory=list)  # per text: kept strings and unit indexes


def _plan(
    req: TranslateRequest, sources: list[detect.Detection], segments: bool, ignore: frozenset[str]
) -> _Plan:
    plan = _Plan()
    for text, source in zip(req.texts, sources, strict=True):
        pieces = _split(text, ignore) if segments else [("text", text)]
        parts: list[str | int] = []
        for kind, piece in pieces:
            core = piece.strip()
            if kind == "kept" or not any(char.isalpha() for char in core):
                parts.append(piece)
                continue
            lead, trail = piece[: len(piece) - len(piece.lstrip())], piece[len(piece.rstrip()) :]
            plan.units.append(core if segments else piece)
            plan.unit_sources.append(source.language)
            parts.extend([lead, len(plan.units) - 1, trail] if segments else [len(plan.units) - 1])
        plan.parts.append(parts)
    return plan


async def translate(
    replica: ReplicaContext,
    call: Call,
    req: TranslateRequest,
    *,
    html: bool = False,
    ignore_tags: Sequence[str] = (),
    by_script: bool = False,
    keep_tags: bool = False,
) -> Translated:
    """The request through the one core: sources detected where asked, markup kept where html.

    html: the family's formatted-translation template (preserve_format) where it has one; otherwise,
    or with keep_tags (tags that must come back byte for byte), "segments": the tags are kept exactly
    and the text between them is translated piece by piece.
    """
    await call.bill(req.texts)  # the characters sent, tags included, as DeepL bills them
    if not html and not req.ensemble and not req.preserve_format and replica.cfg.chimera_url:
        # A pool set to fuse (replica.ensemble_candidates) fuses these dialects' translations too.
        req = dataclasses.replace(req, ensemble=replica.cfg.ensemble_candidates)
    ignore = frozenset(tag.lower() for tag in ignore_tags)
    sources = sources_of(replica, req, html, by_script)
    segments = html and (keep_tags or not _markup_in_core(replica, req, ignore))
    if html and not segments:
        req = dataclasses.replace(req, preserve_format=True)
    plan = _plan(req, sources, segments, ignore)
    results, outcome = await _run(replica, call, req, plan)
    texts = [
        "".join(part if isinstance(part, str) else results[part] for part in parts) for parts in plan.parts
    ]
    return Translated(texts, sources, outcome)


async def _run(
    replica: ReplicaContext, call: Call, req: TranslateRequest, plan: _Plan
) -> tuple[list[str], Outcome]:
    """One core call per source language, all at once under the request's deadline; merged in order."""
    groups: dict[str, list[int]] = {}
    for index, source in enumerate(plan.unit_sources):
        groups.setdefault(source.code, []).append(index)
    subs = [
        dataclasses.replace(
            req, texts=tuple(plan.units[i] for i in indexes), batch=True, source=find_language(code)
        )
        for code, indexes in groups.items()
    ]
    calls = [_core(replica, call, sub, f"{call.id}-{n}") for n, sub in enumerate(subs)]
    outcomes: list[Outcome] = list(await call.run(_together(calls))) if calls else []
    results = [""] * len(plan.units)
    merged = Outcome(cached=[])
    unit_flags: list[list[Flag]] = [[] for _ in plan.units]
    for indexes, outcome in zip(groups.values(), outcomes, strict=True):
        for index, text in zip(indexes, outcome.results, strict=True):
            results[index] = text
        for index, flags in zip(indexes, outcome.verdicts.flags, strict=False):
            unit_flags[index] = flags
        merged.verdicts.retried += outcome.verdicts.retried
        merged.verdicts.replaced += outcome.verdicts.replaced
        merged.verdicts.unfinished += outcome.verdicts.unfinished
        merged.cached.extend(outcome.cached)
        merged.format_lost.extend(outcome.format_lost)
        merged.prompt_tokens += outcome.prompt_tokens
        merged.output_tokens += outcome.output_tokens
        merged.queue_s = max(merged.queue_s, outcome.queue_s)
        merged.engine_s = max(merged.engine_s, outcome.engine_s)
    merged.verdicts.policy = replica.translator.review.policy(req.qa)
    merged.verdicts.flags = review.per_text(plan.parts, unit_flags)  # the header's indexes are texts
    call.note(merged)
    call.log.update(target_lang=req.target.code, texts=len(req.texts), units=len(plan.units))
    call.log["source_lang"] = ",".join(groups) if req.source is AUTO else req.source.code
    return results, merged


async def _together(calls: list[Coroutine[Any, Any, Outcome]]) -> list[Outcome]:
    """The calls gathered inside the request's deadline task (http.guarded): gathered outside it, their
    tasks would start without the deadline a retry keeps to."""
    return list(await asyncio.gather(*calls))


async def _core(replica: ReplicaContext, call: Call, req: TranslateRequest, core_id: str) -> Outcome:
    """One language's texts through the core; with an ensemble, each text's candidates fused (the
    first candidate where the Chimera pool could not, or a 503 with chimera_failure refuse)."""
    outcome = await replica.translator.translate(req, call.caller(core_id))
    if req.ensemble:
        key = ensemble.caller_key(call.request)
        answers = await replica.fusion.fuse_all(req, outcome.candidates, core_id, key)
        ensemble.refuse_if_degraded(replica.cfg, answers)
        outcome.results = [each.result for each in answers]
        outcome.verdicts = replica.translator.review.fused(req, outcome.results)
        call.log["fused"] = call.log.get("fused", 0) + sum(each.fused_by is not None for each in answers)
    return outcome


def detected_source(replica: ReplicaContext, req: TranslateRequest) -> tuple[TranslateRequest, bool]:
    """Native /translate without a source: the request with the detected one, and whether the batch's
    texts are in several languages (then `native_mixed` answers it, one core call per language)."""
    found = sources_of(replica, req, html=False, by_script=False)
    codes = {each.language.code for each in found}
    if len(codes) == 1:
        return dataclasses.replace(req, source=found[0].language), False
    return req, True


async def native_mixed(replica: ReplicaContext, call: Call, req: TranslateRequest) -> Response:
    """/translate's batch answer, with source_lang the batch's most frequent and source_langs per text."""
    done = await translate(replica, call, req)
    codes = [each.language.code for each in done.sources]
    body: dict[str, Any] = {
        "source_lang": max(set(codes), key=codes.count),
        "source_langs": codes,
        "target_lang": req.target.code,
        "results": done.texts,
        "cached": done.outcome.cached,
        **done.outcome.verdicts.body(batch=True),
        "latency_ms": round(call.elapsed_ms(), 1),
        "request_id": call.id,
        "model": replica.engine.model_name,
    }
    return JSONResponse(body, headers={"X-Request-ID": call.id, **done.outcome.verdicts.headers()})

"""Request parsing and validation for POST /translate: bytes in, a checked request or a 4xx ApiError out."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.families import SamplingDefaults, chimera
from hunyuan_serve.families.base import Features, GlossaryInvalid, PromptInputError
from hunyuan_serve.families.build import Limits, feature_limits
from hunyuan_serve.families.glossary import Terms, parse_request_glossary
from hunyuan_serve.languages import AUTO, Language, UnknownLanguage, find_language, is_auto
from hunyuan_serve.replica import review
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.bounds import SAMPLING_BOUNDS
from hunyuan_serve.replica.engine.interface import Sampling
from hunyuan_serve.replica.errors import ApiError


@dataclass(frozen=True)
class TranslateRequest:
    """A validated request: one or more texts, two languages, full sampling parameters."""

    texts: tuple[str, ...]
    batch: bool
    source: Language
    target: Language
    sampling: Sampling
    # The optional instructions (terms, context, style), each for the family's own template; empty: not asked.
    glossary: Terms = ()  # every term the request sent; each text's prompt gets those occurring in it
    context: str = ""
    style: str = ""
    preserve_format: bool = False
    stream: bool = False  # answer as server-sent events of the text as it is generated (one text only)
    ensemble: int = 0  # candidates per text to sample and have the Chimera pool fuse; 0: a plain request
    priority: str | None = None  # the body's class, interactive or bulk (admission/priority.py), if given
    qa: str | None = None  # the answer checks' policy asked for (replica/review.py), if given

    def asked(self) -> Features:
        """What the request asks for, with its whole glossary (a text's prompt gets the terms in it)."""
        return Features(self.glossary, self.context, self.style, self.preserve_format)


_KNOWN_KEYS = {
    "text",
    "texts",
    "source_lang",
    "target_lang",
    "src_lang",
    "tgt_lang",
    "temperature",
    "top_p",
    "top_k",
    "repetition_penalty",
    "max_tokens",
    "glossary",
    "context",
    "style",
    "preserve_format",
    "stream",
    "ensemble",
    "priority",
    "qa",
    "model",  # what the edge routes by with several pools; checked against the served name
}


def _number(data: dict[str, Any], key: str, default: float, low: float, high: float, low_open: bool) -> float:
    value = data.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ApiError(422, "invalid_parameter", f"{key} must be a number, got {json.dumps(value)[:40]}")
    too_low = value <= low if low_open else value < low
    if too_low or value > high:
        left = "(" if low_open else "["
        raise ApiError(422, "invalid_parameter", f"{key} must be in {left}{low}, {high}], got {value}")
    return float(value)


def _integer(data: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = data.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ApiError(
                422, "invalid_parameter", f"{key} must be an integer, got {json.dumps(value)[:40]}"
            )
    if not low <= value <= high:
        raise ApiError(422, "invalid_parameter", f"{key} must be in [{low}, {high}], got {value}")
    return value


def _bounded(data: dict[str, Any], key: str, default: float, max_model_len: int) -> Any:
    kind, low, high, low_open = SAMPLING_BOUNDS[key]
    if kind == "integer":
        return _integer(data, key, int(default), int(low), max_model_len - 1 if high is None else int(high))
    assert high is not None  # only max_tokens is bounded by the context
    return _number(data, key, default, low, high, low_open)


def parse_sampling(
    data: dict[str, Any], defaults: SamplingDefaults, max_tokens: int, max_model_len: int
) -> Sampling:
    """Sampling parameters of a request, range-checked; each one it leaves out comes from `defaults`."""
    top_k = _bounded(data, "top_k", defaults.top_k, max_model_len)
    if top_k == 0:
        raise ApiError(422, "invalid_parameter", "top_k must be -1 (disabled) or at least 1, got 0")
    return Sampling(
        temperature=_bounded(data, "temperature", defaults.temperature, max_model_len),
        top_p=_bounded(data, "top_p", defaults.top_p, max_model_len),
        top_k=top_k,
        repetition_penalty=_bounded(data, "repetition_penalty", defaults.repetition_penalty, max_model_len),
        max_tokens=_bounded(data, "max_tokens", default_max_tokens(max_tokens, max_model_len), max_model_len),
    )


def default_max_tokens(configured: int, max_model_len: int) -> int:
    """The output budget of a request that names none: the configured one, but never more than half the
    context, so a small max_model_len (512 with the default 512) still leaves room for the text; a
    translation needs about as many tokens out as in. A request may still ask for up to max_model_len - 1."""
    return max(1, min(configured, max_model_len // 2))


def _language(data: dict[str, Any], key: str, alias: str) -> Language:
    value = data.get(key, data.get(alias))
    if value is None:
        raise ApiError(422, "missing_field", f"{key} (or {alias}) is required")
    if not isinstance(value, str):
        raise ApiError(422, "invalid_parameter", f"{key} must be a language code string")
    try:
        return find_language(value)
    except UnknownLanguage as err:
        raise ApiError(400, "unsupported_language", str(err)) from None


def _source(data: dict[str, Any]) -> Language:
    """The source language, or AUTO (detected from the texts later) when it is missing or 'auto'."""
    value = data.get("source_lang", data.get("src_lang"))
    if value is None or (isinstance(value, str) and is_auto(value)):
        return AUTO
    return _language(data, "source_lang", "src_lang")


def _texts(data: dict[str, Any], cfg: ReplicaConfig) -> tuple[tuple[str, ...], bool]:
    if ("text" in data) == ("texts" in data):
        raise ApiError(
            422, "missing_field", "give exactly one of text (a string) or texts (a list of strings)"
        )
    if "text" in data:
        items: Any = [data["text"]]
        batch = False
    else:
        items = data["texts"]
        batch = True
        if not isinstance(items, list):
            raise ApiError(422, "invalid_parameter", "texts must be a list of strings")
        if not items:
            raise ApiError(422, "empty_text", "texts must not be empty")
        if len(items) > cfg.max_batch_texts:
            raise ApiError(
                413,
                "too_many_texts",
                f"{len(items)} texts in one request; the limit is {cfg.max_batch_texts}",
            )
    for index, item in enumerate(items):
        where = f"texts[{index}]" if batch else "text"
        if not isinstance(item, str):
            raise ApiError(422, "invalid_parameter", f"{where} must be a string")
        if not item.strip():
            raise ApiError(422, "empty_text", f"{where} is empty or only whitespace")
        if "\x00" in item:
            raise ApiError(422, "invalid_text", f"{where} contains a NUL character")
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(422, "invalid_text", f"{where} contains a lone surrogate (\\u escape)") from None
    return tuple(items), batch


def _instruction_text(data: dict[str, Any], key: str, limit: int) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ApiError(422, "invalid_parameter", f"{key} must be a string, got {json.dumps(value)[:40]}")
    if "\x00" in value:
        raise ApiError(422, "invalid_text", f"{key} contains a NUL character")
    value = value.strip()
    if len(value) > limit:
        raise ApiError(
            413, f"{key}_too_long", f"{key} is {len(value)} characters; the limit is {limit} characters"
        )
    return value


def _instructions(data: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """glossary, context, style, preserve_format: checked shapes and limits (the family is checked later)."""
    try:
        glossary = parse_request_glossary(data.get("glossary"), limits.glossary_terms, limits.term_chars)
    except GlossaryInvalid as err:
        raise ApiError(422, "invalid_glossary", str(err)) from None
    preserve = data.get("preserve_format")
    if preserve is not None and not isinstance(preserve, bool):
        raise ApiError(
            422,
            "invalid_parameter",
            f"preserve_format must be true or false, got {json.dumps(preserve)[:40]}",
        )
    return {
        "glossary": glossary,
        "context": _instruction_text(data, "context", limits.context_chars),
        "style": _instruction_text(data, "style", limits.style_chars),
        "preserve_format": bool(preserve),
    }


def decode_body(raw: bytes) -> dict[str, Any]:
    """UTF-8 JSON object or a 400 naming what is wrong with the bytes."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ApiError(400, "invalid_encoding", f"body is not UTF-8 (byte {err.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ApiError(
            400, "invalid_json", f"body is not valid JSON: {err.msg} at position {err.pos}"
        ) from None
    except RecursionError:
        raise ApiError(400, "invalid_json", "body JSON is nested too deeply") from None
    if not isinstance(data, dict):
        raise ApiError(422, "invalid_request", "body must be a JSON object")
    return data


def parse_translate(
    raw: bytes, cfg: ReplicaConfig, defaults: SamplingDefaults, max_model_len: int, served: str | None = None
) -> TranslateRequest:
    """Everything checkable without the tokenizer; the token budget is checked once prompts exist.
    served: the model this replica serves, which a `model` in the body must name."""
    if len(raw) > cfg.max_body_bytes:
        raise ApiError(413, "body_too_large", f"body is {len(raw)} bytes; the limit is {cfg.max_body_bytes}")
    data = decode_body(raw)
    if served is not None:
        check_requested_model(data, served)
    return parse_fields(data, cfg, defaults, max_model_len)


def check_requested_model(data: dict[str, Any], served: str) -> None:
    """`model` (optional, as OpenAI's): a string naming the served model, else a 404 model_not_found."""
    model = data.get("model")
    if model is None:
        return
    if not isinstance(model, str):
        raise ApiError(422, "invalid_parameter", "model must be a string")
    if model != served:
        raise ApiError(
            404, "model_not_found", f"the model '{model[:100]}' does not exist; this server serves '{served}'"
        )


def parse_fields(
    data: dict[str, Any], cfg: ReplicaConfig, defaults: SamplingDefaults, max_model_len: int
) -> TranslateRequest:
    """A decoded body's fields, checked (the other APIs' adapters build these fields from their own)."""
    unknown = sorted(set(data) - _KNOWN_KEYS)
    if unknown:
        raise ApiError(422, "unknown_field", f"unknown field(s): {', '.join(unknown)[:200]}")
    texts, batch = _texts(data, cfg)
    source = _source(data)
    target = _language(data, "target_lang", "tgt_lang")
    sampling = parse_sampling(data, defaults, cfg.max_tokens, max_model_len)
    instructions = _instructions(data, feature_limits(cfg))
    stream = _stream_flag(data, batch, instructions["preserve_format"])
    return TranslateRequest(
        texts=texts,
        batch=batch,
        source=source,
        target=target,
        sampling=sampling,
        stream=stream,
        ensemble=_ensemble(data, cfg, stream, instructions["preserve_format"]),
        priority=priority.body_field(data.get("priority")),
        qa=review.request_policy(data.get("qa")),
        **instructions,
    )


ENSEMBLE_SHAPE = f'{{"candidates": N}}, N from {chimera.MIN_CANDIDATES} to {chimera.MAX_CANDIDATES}'


def _ensemble(data: dict[str, Any], cfg: ReplicaConfig, stream: bool, preserve_format: bool) -> int:
    """`ensemble`: {"candidates": N} (default 6), only with a Chimera pool to fuse them; 0 when absent."""
    value = data.get("ensemble")
    if value is None:  # the pool's own default (replica.ensemble_candidates), where it can apply
        return 0 if stream or preserve_format or not cfg.chimera_url else cfg.ensemble_candidates
    if not isinstance(value, dict) or set(value) - {"candidates"}:
        raise ApiError(400, "invalid_ensemble", f"ensemble must be {ENSEMBLE_SHAPE} (default 6)")
    count = value.get("candidates", chimera.DEFAULT_CANDIDATES)
    if isinstance(count, bool) or not isinstance(count, int):
        got = json.dumps(count)[:40]
        raise ApiError(400, "invalid_ensemble", f"ensemble.candidates must be an integer, got {got}")
    try:
        chimera.check_count(count, "ensemble.candidates")
    except PromptInputError as err:
        raise ApiError(400, "invalid_ensemble", str(err)) from None
    if stream or preserve_format:
        # The answer is the fusion of whole candidates, and the Chimera's prompt carries no <sn> tags.
        with_what = "stream" if stream else "preserve_format"
        raise ApiError(400, "invalid_ensemble", f"ensemble cannot be combined with {with_what}")
    if not cfg.chimera_url:
        raise ApiError(
            400,
            "ensemble_unavailable",
            "ensemble needs a Chimera pool to fuse its candidates, and none is configured "
            "(replica.chimera_url)",
        )
    return count


def _stream_flag(data: dict[str, Any], batch: bool, preserve_format: bool) -> bool:
    """`stream`: a boolean, for one text; preserve_format restores markup from the whole answer only."""
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(
            422, "invalid_parameter", f"stream must be true or false, got {json.dumps(stream)[:40]}"
        )
    if stream and batch:
        raise ApiError(422, "invalid_parameter", "stream works with one text, not texts")
    if stream and preserve_format:
        raise ApiError(422, "unsupported_feature", "stream cannot be combined with preserve_format")
    return stream


@dataclass(frozen=True)
class FuseRequest:
    """A validated POST /fuse: one source text, its candidate translations, the Chimera's sampling."""

    text: str
    source: Language
    target: Language
    candidates: tuple[str, ...]
    sampling: Sampling


_FUSE_KEYS = {"text", "source_lang", "target_lang", "src_lang", "tgt_lang", "candidates"} | {
    "temperature",
    "top_p",
    "top_k",
    "repetition_penalty",
    "max_tokens",
}


def _candidates(data: dict[str, Any]) -> tuple[str, ...]:
    """`candidates`: a list of strings (empty ones too: a candidate may be empty), 2 to 8 of them."""
    items = data.get("candidates")
    if items is None:
        raise ApiError(422, "missing_field", "candidates (a list of candidate translations) is required")
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ApiError(422, "invalid_parameter", "candidates must be a list of strings")
    try:
        chimera.check_count(len(items))
    except PromptInputError as err:
        raise ApiError(400, "invalid_candidates", str(err)) from None
    for index, item in enumerate(items):
        if "\x00" in item:
            raise ApiError(422, "invalid_text", f"candidates[{index}] contains a NUL character")
    return tuple(items)


def parse_fuse(raw: bytes, cfg: ReplicaConfig, defaults: SamplingDefaults, max_model_len: int) -> FuseRequest:
    """POST /fuse's body: text, source_lang (required: the prompt names it), target_lang, candidates."""
    if len(raw) > cfg.max_body_bytes:
        raise ApiError(413, "body_too_large", f"body is {len(raw)} bytes; the limit is {cfg.max_body_bytes}")
    data = decode_body(raw)
    unknown = sorted(set(data) - _FUSE_KEYS)
    if unknown:
        raise ApiError(422, "unknown_field", f"unknown field(s): {', '.join(unknown)[:200]}")
    if "text" not in data:
        raise ApiError(422, "missing_field", "give text (a string): /fuse fuses the candidates of one text")
    texts, _ = _texts(data, cfg)
    return FuseRequest(
        text=texts[0],
        source=_language(data, "source_lang", "src_lang"),
        target=_language(data, "target_lang", "tgt_lang"),
        candidates=_candidates(data),
        sampling=parse_sampling(data, defaults, cfg.max_tokens, max_model_len),
    )

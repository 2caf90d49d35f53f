"""Structured localization tasks on /v1/chat/completions (Weblate's and others'): strings translated,
the answer built here."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from hunyuan_serve.families.base import GLOSSARY
from hunyuan_serve.families.build import FAMILY_FEATURES
from hunyuan_serve.languages import Language, UnknownLanguage, find_language
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.apis import compat
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.outcome import Outcome

# Weblate 2026 (weblate/machinery/llm.py, PROMPT and _build_message; 2026.10.1) sends a long system prompt
# (rules and this JSON schema), one worked example as a user/assistant pair, then one user message
# {"source_language", "target_language", "glossary": [{"source", "target", ...}], "strings": [{"source",
# "parts", ...}]}; it reads back a JSON array with one entry per string, a plain string accepted where
# its placeholders @@PHn@@ are all kept exactly (_normalize_translation_item, _validate_translations).
_TASK_KEYS = {"source_language", "target_language", "strings"}
PLACEHOLDER = re.compile(r"@@PH\d+@@")
# A placeholder as the core's markup handling keeps it: an empty element it never translates.
_AS_TAG = '<hs-ph n="{}"/>'
_TAG_BACK = re.compile(r'<hs-ph n="(\d+)"/>')


@dataclass(frozen=True)
class Task:
    """One structured request: its languages, its strings as sent, the glossary's pairs, and the form
    of the answer its tool reads (`reply`: one of REPLIES; `keys` name a numbered answer's entries)."""

    source: Language
    target: Language
    strings: tuple[str, ...]
    glossary: tuple[tuple[str, str], ...]
    reply: str = "weblate"
    keys: tuple[str, ...] = ()


def reply_text(task: Task, results: list[str]) -> str:
    """The answer as the task's tool reads it: Weblate's JSON array, SubtitleEdit's object keyed by line
    number, Tolgee's {output, contextDescription}, or the one translation alone."""
    if task.reply == "numbered":
        return json.dumps(dict(zip(task.keys, results, strict=True)), ensure_ascii=False)
    if task.reply == "tolgee":
        return json.dumps({"output": results[0], "contextDescription": ""}, ensure_ascii=False)
    if task.reply == "text":
        return results[0]
    return json.dumps(results, ensure_ascii=False)


def _bad(message: str) -> ApiError:
    return ApiError(400, "invalid_localization_task", message)


def json_object(text: str) -> dict[str, Any] | None:
    """The JSON object a message holds whole, or None (not JSON, or not an object)."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _object(text: str) -> dict[str, Any] | None:
    data = json_object(text)
    return data if data is not None and set(data) >= _TASK_KEYS else None


def _language(data: dict[str, Any], key: str) -> Language:
    code = data.get(key)
    if not isinstance(code, str):
        raise _bad(f"{key} must be a language code")
    try:
        return find_language(code.split("@")[0])  # gettext's sr@latin: the language before the variant
    except UnknownLanguage as err:
        raise ApiError(400, "unsupported_language", f"the task's {key}: {err}") from None


def _strings(data: dict[str, Any], limit: int) -> tuple[str, ...]:
    items = data.get("strings")
    if not isinstance(items, list) or not items:
        raise _bad("strings must be a non-empty list of {source, parts} objects")
    if len(items) > limit:
        raise ApiError(400, "too_many_texts", f"{len(items)} strings in one task; the limit is {limit}")
    out = []
    for index, item in enumerate(items):
        source = item.get("source") if isinstance(item, dict) else None
        if not isinstance(source, str):
            raise _bad(f"strings[{index}].source must be a string")
        out.append(source)
    return tuple(out)


def _glossary(data: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    items = data.get("glossary") or []
    if not isinstance(items, list):
        raise _bad("glossary must be a list of {source, target} objects")
    pairs = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("source", "target")):
            raise _bad(f"glossary[{index}] must have a source and a target string")
        pairs.append((item["source"], item["target"]))
    return tuple(pairs)


def structured_task(messages: list[tuple[str, str]], limit: int) -> Task | None:
    """The task of a chat whose last message is the user's JSON object of strings (the worked example
    before it is ignored: the answer is built here, not written by the model); None for any other chat."""
    if not messages or messages[-1][0] != "user":
        return None
    data = _object(messages[-1][1])
    if data is None:
        return None
    source, target = _language(data, "source_language"), _language(data, "target_language")
    return Task(source, target, _strings(data, limit), _glossary(data))


def _masked(text: str) -> str:
    return PLACEHOLDER.sub(lambda m: _AS_TAG.format(m.group()[4:-2]), text)


def _unmasked(text: str) -> str:
    return _TAG_BACK.sub(lambda m: f"@@PH{m.group(1)}@@", text)


def _terms(replica: ReplicaContext, task: Task, texts: list[str]) -> list[dict[str, str]]:
    """The glossary's pairs found in the strings, for a family with a terminology prompt (the others
    have no place for them); each string's prompt then gets those it holds."""
    if GLOSSARY not in FAMILY_FEATURES[replica.translator.family]:
        return []
    joined = "\n".join(texts).lower()
    found = dict.fromkeys(pair for pair in task.glossary if pair[0].strip() and pair[0].lower() in joined)
    return [{"source": source, "target": target} for source, target in found]


async def answer(replica: ReplicaContext, call: Call, task: Task) -> tuple[str, Outcome]:
    """The answer the task's tool reads, one translation per string: placeholders and markup kept exactly,
    the text between them translated through the one core as one batch; a blank string comes back as
    it was sent."""
    sent = [index for index, text in enumerate(task.strings) if text.strip()]
    texts = [_masked(task.strings[index]) for index in sent]
    results = list(task.strings)
    outcome = Outcome(cached=[])
    if texts:
        fields: dict[str, Any] = {
            "texts": texts,
            "source_lang": task.source.code,
            "target_lang": task.target.code,
        }
        terms = _terms(replica, task, texts)
        fields.update({"glossary": terms} if terms else {})
        req = compat.build_request(replica, fields)
        done = await compat.translate(replica, call, req, html=True, keep_tags=True)
        for index, text in zip(sent, done.texts, strict=True):
            results[index] = _unmasked(text)
        outcome = done.outcome
    call.log.update(structured_task=task.reply)
    return reply_text(task, results), outcome

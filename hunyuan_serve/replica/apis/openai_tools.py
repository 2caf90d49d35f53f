"""Tolgee's and SubtitleEdit's translation chats on /v1/chat/completions, recognised as tasks."""

from __future__ import annotations

import json
import re
from typing import Any

from hunyuan_serve.languages import Language, UnknownLanguage, find_language
from hunyuan_serve.replica.apis.openai_tasks import Task, json_object
from hunyuan_serve.replica.errors import ApiError

# Tolgee's default prompt (ee/.../prompt/PromptFragmentsHelper.kt, fragment "translationInfo") names the
# text JSON-escaped (PromptHandlebarsHelper.escapeJson) and the languages by their project names; with
# its "translateJson" fragment it reads back {"output", "contextDescription"} (PromptResultParser.kt).
_TOLGEE = re.compile(r'^Translate "((?:[^"\\]|\\.)*)" from (.{1,64}?) to (.{1,64}?)\.[ \t]*$', re.MULTILINE)
_TOLGEE_JSON = ('"output": <translation>', "Strictly return only valid json!")
_TOLGEE_GLOSSARY = "Use these glossary terms when the source text contains them"
# SubtitleEdit's batch engines (LlamaCppAdvancedProtocol.cs): a system prompt naming the languages
# ("Translate each subtitle line from {0} to {1}."), a user message {"history": [...], "lines": [{"n",
# "text"}]}, and an answer read as a JSON object keyed by each line's number.
_SUBTITLE_LANGUAGES = re.compile(r"\bfrom ([A-Z][^\n.,:;]{0,40}?) to ([A-Z][^\n.,:;]{0,40}?)[.,:;\n]")
_SUBTITLE_GLOSSARY = "Glossary - always translate these terms exactly as given:"
# SubtitleEdit's one-line engines (ToolsSettings.cs, OpenAiCompatibleTranslatePrompt): the prompt, a blank
# line, then the text (LlmTranslatePrompt.BuildEncodedUserMessage); the answer is the translation alone.
_SUBTITLE_LINE = re.compile(r"\ATranslate from ([A-Z][^\n,:]{0,40}?) to ([A-Z][^\n,:]{0,40}?)[,:][^\n]*\n\n")
# The English names these tools list that are not a language's own name here (SubtitleEdit's
# ChatGptTranslate.ListLanguages; Tolgee's language names are the project's).
_NAMES = {
    "chinese (simplified)": "zh",
    "chinese (traditional)": "zh-Hant",
    "brazilian portuguese": "pt",
    "portuguese (brazil)": "pt",
    "filipino": "tl",
}


def _language(name: str, tool: str) -> Language:
    try:
        return find_language(_NAMES.get(name.strip().lower(), name.strip()))
    except UnknownLanguage as err:
        raise ApiError(400, "unsupported_language", f"{tool}'s prompt names {err}") from None


def _tolgee_glossary(prompt: str) -> tuple[tuple[str, str], ...]:
    """The glossary fragment's terms: one JSON object a line after its heading, until a blank line;
    a term without a target (translate it as any word) or forbidden is not a pair to keep."""
    head = prompt.find(_TOLGEE_GLOSSARY)
    if head < 0:
        return ()
    pairs = []
    for line in prompt[head:].splitlines()[1:]:
        item = json_object(line.strip())
        if item is None:
            break
        source, target = item.get("source"), item.get("target")
        if isinstance(source, str) and isinstance(target, str) and not item.get("isForbiddenTerm"):
            pairs.append((source, target))
    return tuple(pairs)


def _tolgee(prompt: str, data: dict[str, Any]) -> Task | None:
    found = list(_TOLGEE.finditer(prompt))
    if not found:
        return None
    text, source, target = found[-1].groups()
    try:
        string = json.loads(f'"{text}"')
    except json.JSONDecodeError:
        return None
    fmt = data.get("response_format")
    schema = fmt.get("json_schema") if isinstance(fmt, dict) else None
    asked = isinstance(schema, dict) or any(mark in prompt for mark in _TOLGEE_JSON)
    return Task(
        _language(source, "Tolgee"),
        _language(target, "Tolgee"),
        (string,),
        _tolgee_glossary(prompt),
        reply="tolgee" if asked else "text",
    )


def _subtitle_glossary(system: str) -> tuple[tuple[str, str], ...]:
    head = system.find(_SUBTITLE_GLOSSARY)
    if head < 0:
        return ()
    pairs = []
    for line in system[head:].splitlines()[1:]:
        source, sep, target = line.partition(" = ")
        if not sep:
            break
        pairs.append((source.strip(), target.strip()))
    return tuple(pairs)


def _subtitle_batch(system: str, user: str, limit: int) -> Task | None:
    data = json_object(user)
    lines = data.get("lines") if data is not None else None
    if not isinstance(lines, list) or not lines or set(data or {}) - {"history", "lines"}:
        return None
    named = _SUBTITLE_LANGUAGES.search(system)
    if named is None:
        raise ApiError(
            400,
            "invalid_localization_task",
            'SubtitleEdit\'s system prompt must name the languages as "from {0} to {1}" (its default does)',
        )
    if len(lines) > limit:
        raise ApiError(400, "too_many_texts", f"{len(lines)} lines in one batch; the limit is {limit}")
    keys, texts = [], []
    for index, line in enumerate(lines):
        if not isinstance(line, dict) or not isinstance(line.get("text"), str) or "n" not in line:
            raise ApiError(400, "invalid_localization_task", f"lines[{index}] must be {{n, text}}")
        keys.append(str(line["n"]))
        texts.append(line["text"])
    source, target = (_language(name, "SubtitleEdit") for name in named.groups())
    return Task(source, target, tuple(texts), _subtitle_glossary(system), reply="numbered", keys=tuple(keys))


def _subtitle_line(user: str) -> Task | None:
    named = _SUBTITLE_LINE.match(user)
    if named is None or not user[named.end() :].strip():
        return None
    source, target = (_language(name, "SubtitleEdit") for name in named.groups())
    return Task(source, target, (user[named.end() :].strip(),), (), reply="text")


def tool_task(messages: list[tuple[str, str]], data: dict[str, Any], limit: int) -> Task | None:
    """The task of a chat in one of these tools' shapes (its text translated with the family's own
    prompt, its answer built here in the form the tool reads); None for any other chat."""
    if not messages or messages[-1][0] != "user":
        return None
    system = "\n\n".join(text for role, text in messages if role in ("system", "developer"))
    user = messages[-1][1]
    return _subtitle_batch(system, user, limit) or _tolgee(user, data) or _subtitle_line(user)

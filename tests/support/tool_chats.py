"""Tolgee's and SubtitleEdit's chat requests, built as their sources build them (each names its file)."""

from __future__ import annotations

import json
from typing import Any

import httpx

# Tolgee: tolgee/tolgee-platform at dd7f5973 (2026-08-06). The body and headers are OpenaiApiService.kt's
# (ee/backend/app/src/main/kotlin/io/tolgee/ee/component/llm/, last changed in 88ecdb19): Jackson writes
# RequestBody's fields, `model` even when null, `temperature` and `reasoning_effort` only when set (the
# temperature 0 of 762621d4 was reverted in 9010a61b); the user content is the prompt's text parts and,
# when the prompt asks for JSON, "Strictly return only valid json!". The prompt is DefaultPromptHelper.kt's
# template with the fragments of PromptFragmentsHelper.kt (ee/.../service/prompt/, last changed in
# ac42cfcc) filled for one key, as PromptVariablesHelper.kt fills them (the text through escapeJson).
TOLGEE_PROMPT = """You are a translator providing services within a software localization platform that \
requires strict adherence to instructions.
Each translation is associated with a translation key, which typically reflects the structure of the \
app—so similar keys are often related in meaning.

Don't add any extra dots, spaces or additional marks.
Keep original line breaks in the text.
Keep the style of source text.
All translations are part of software product, don't transform them into sentences.

If a message contains text inside curly braces `{{}}`, treat it as an ICU parameter or placeholder.
Never translate, modify, reorder, or remove placeholder names or variables inside `{{}}`.

Translation can contain also different i18n placeholder formats.
If you spot some kind, don't translate them and keep them in the original format.
{glossary}
You are working with translation key "{key}" (no need to mention it in response).

Translate "{text}" from {source} to {target}.

Return translation output and briefly describe the translation context (just a few words).
Follow this json format:
```
{{
   "output": <translation>,
   "contextDescription": <description>
}}
```
"""
TOLGEE_GLOSSARY = """
Use these glossary terms when the source text contains them, adapting the form to fit the context:
{terms}

Field descriptions:
source: the term as it appears in the source text.
"""
# RequestResponseFormat's default: a strict schema of the two fields PromptResultParser.kt reads.
TOLGEE_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "simple_response",
        "schema": {
            "type": "object",
            "properties": {"output": {"type": "string"}, "contextDescription": {"type": "string"}},
            "required": ["output", "contextDescription"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}


def tolgee(
    text: str, source: str, target: str, *, terms: tuple[tuple[str, str], ...] = (), schema: bool = True
) -> dict[str, Any]:
    """One key's translation as Tolgee's OpenAI provider posts it (format json_schema, or none)."""
    lines = "\n".join(json.dumps({"source": s, "target": t, "isCaseSensitive": False}) for s, t in terms)
    prompt = TOLGEE_PROMPT.format(
        glossary=TOLGEE_GLOSSARY.format(terms=lines) if terms else "",
        key="app.title",
        text=json.dumps(text)[1:-1],  # PromptHandlebarsHelper.escapeJson
        source=source,
        target=target,
    )
    content = [{"type": "text", "text": prompt}, {"type": "text", "text": "Strictly return only valid json!"}]
    return {
        "max_completion_tokens": 800,
        "stream": False,
        **({"response_format": TOLGEE_SCHEMA} if schema else {}),
        "messages": [{"role": "user", "content": content}],
        "model": None,
    }


def tolgee_headers(key: str) -> dict[str, str]:
    return {"content-type": "application/json", "Authorization": f"Bearer {key}", "api-key": key}


# SubtitleEdit: SubtitleEdit/subtitleedit at 5c98fbdf (2026-08-22). Its batch engines ("llama.cpp advanced",
# Ollama advanced: src/ui/Features/Translate/LlamaCppAdvanced/) build the system prompt and the user
# message in LlamaCppAdvancedProtocol.cs (798fe1c5) and the body in LlamaCppAdvancedClient.cs (8dcc0dfc):
# streamed, cache_prompt, temperature 0.2 at least, max_tokens from the batch's length, a json_schema
# response_format keyed "1".."N" (then json_object, then none, on a refusal).
SUBTITLE_PROMPT = (
    "You are a professional subtitle translator. Translate each subtitle line from {0} to {1}. "
    "Preserve meaning, tone and style; do not censor the translation. "
    "Keep formatting tags exactly as they are."
)
SUBTITLE_PROTOCOL = (
    '\n\nThe user message is a JSON object. "history" holds recent already-translated lines (source and '
    "translation) - use them only for context and consistency (names, pronouns, formality), do not "
    're-translate them. "lines" holds the lines to translate now, each with a line number "n" and its '
    '"text" (a "\\n" inside a text is a line break inside that subtitle).\n'
    "Answer with ONLY a JSON object mapping every line number to its translation, e.g. "
    '{"1":"...","2":"..."}. Include each line number exactly once and nothing else.'
)


def subtitle_batch(
    lines: list[str],
    source: str,
    target: str,
    *,
    history: tuple[tuple[str, str], ...] = (),
    glossary: tuple[tuple[str, str], ...] = (),
    response_format: str = "json_schema",
) -> dict[str, Any]:
    """One batch as SubtitleEdit's advanced engine posts it (BuildSystemPrompt, BuildUserContent,
    BuildResponseFormatJson, BuildRequestJson)."""
    system = SUBTITLE_PROMPT.replace("{0}", source).replace("{1}", target)
    if glossary:
        system += "\n\nGlossary - always translate these terms exactly as given:"
        system += "".join(f"\n{s} = {t}" for s, t in glossary)
    system += SUBTITLE_PROTOCOL
    user = {
        "history": [{"source": s, "translation": t} for s, t in history],
        "lines": [{"n": n, "text": text} for n, text in enumerate(lines, 1)],
    }
    numbers = [str(n) for n in range(1, len(lines) + 1)]
    formats: dict[str, Any] = {
        "json_schema": {
            "type": "json_schema",
            "json_schema": {
                "name": "translations",
                "strict": True,
                "schema": {
                    "type": "object",
                    "properties": {n: {"type": "string"} for n in numbers},
                    "required": numbers,
                    "additionalProperties": False,
                },
            },
        },
        "json_object": {"type": "json_object"},
    }
    body: dict[str, Any] = {"stream": True, "cache_prompt": True, "temperature": 0.2}
    body["max_tokens"] = 200 + sum(32 + 2 * len(text) for text in lines)
    if response_format in formats:
        body["response_format"] = formats[response_format]
    body["messages"] = [
        {"role": "system", "content": system},
        {"role": "user", "content": json.dumps(user, ensure_ascii=False, separators=(",", ":"))},
    ]
    return body


# Its one-line engine "OpenAI Compatible API" (src/libuilogic/AutoTranslate/OpenAiCompatibleTranslate.cs,
# 86ff4349): the default prompt of ToolsSettings.cs (de905928), a blank line, the text, line breaks as
# "<br />" (LlmTranslatePrompt.BuildEncodedUserMessage, Json.EncodeJsonText).
SUBTITLE_LINE_PROMPT = (
    "Translate from {0} to {1}, keep punctuation as input, keep line breaks exactly the same, do not "
    "censor the translation, give only the output without comments:"
)


def subtitle_line(text: str, source: str, target: str, model: str = "") -> dict[str, Any]:
    prompt = SUBTITLE_LINE_PROMPT.replace("{0}", source).replace("{1}", target)
    content = prompt + "\n\n" + text.strip().replace("\n", "<br />")
    return {**({"model": model} if model else {}), "messages": [{"role": "user", "content": content}]}


def streamed_text(response: httpx.Response) -> str:
    """A streamed chat answer's text, its deltas joined, as SubtitleEdit's client assembles it."""
    assert response.status_code == 200, response.text
    chunks = [json.loads(line[6:]) for line in response.text.split("\n\n") if line.startswith("data: {")]
    return "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])

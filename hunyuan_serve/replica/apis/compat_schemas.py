"""JSON Schemas of the OpenAI, DeepL and LibreTranslate request bodies, from the sets their parsers use."""

from __future__ import annotations

from hunyuan_serve.families.base import CONTEXT, GLOSSARY, STYLE
from hunyuan_serve.families.build import FAMILY_FEATURES
from hunyuan_serve.languages import LANGUAGES
from hunyuan_serve.replica import glossaries as g
from hunyuan_serve.replica.apis import codes, openai_schema
from hunyuan_serve.replica.apis import request_schemas as rs
from hunyuan_serve.replica.apis.compat_fields import (
    DEEPL_FORMALITY,
    DEEPL_NO_EFFECT,
    DEEPL_TAG_HANDLING,
    LIBRE_FORMATS,
)
from hunyuan_serve.replica.apis.request_schemas import (
    NO_NUL,
    NON_BLANK,
    Schema,
    language_enum,
    nullable,
    sampling,
    text,
)
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.documents import jobs as documents

ANY: Schema = {}
FALSY: Schema = {
    "anyOf": [
        {"enum": [None, False, 0, ""]},
        {"type": "array", "maxItems": 0},
        {"type": "object", "maxProperties": 0},
    ]
}
# One TSV entry: two terms without control characters or line breaks (glossaries.check_term), not blank.
_TERM_CHAR = "[^\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029]"
_TERM = f"{_TERM_CHAR}*[^\\s\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029]{_TERM_CHAR}*"
TERM_LINE = f"^{_TERM}\\t{_TERM}$"
# LibreTranslate's /detect only asks that q is not blank (NUL included).
_DETECTABLE = "[^\\s\\x1c-\\x1f\\x85]"
NAME: Schema = {"type": "string", "pattern": _DETECTABLE}  # a glossary's: not blank (check_name)


def _texts_or_one(limit: int) -> Schema:
    return {"anyOf": [text(), {"type": "array", "items": text(), "minItems": 1, "maxItems": limit}]}


def _openai_common(replica: ReplicaContext) -> dict[str, Schema]:
    props = sampling(replica.engine.max_model_len)
    props["max_completion_tokens"] = ANY  # read only without max_tokens: _openai_body checks it
    penalty = nullable({"type": "number", "minimum": -2, "maximum": 2})
    stop = {"type": "string", "minLength": 1}
    options = {
        "type": "object",
        "properties": {"include_usage": {"type": "boolean"}, "include_obfuscation": ANY},
        "additionalProperties": False,
    }
    props.update(
        model=nullable({"type": "string", "enum": [replica.engine.model_name]}),
        stream=nullable({"type": "boolean"}),
        stream_options=nullable(options),
        stop=nullable(
            {"anyOf": [stop, {"type": "array", "items": stop, "maxItems": openai_schema.MAX_STOPS}]}
        ),
        presence_penalty=penalty,
        frequency_penalty=penalty,
    )
    props.update(dict.fromkeys(openai_schema._IGNORED, ANY))
    props.update({theirs: props[ours] for theirs, ours in openai_schema._ALIASES.items()})
    props.update({key: {"enum": list(off)} for key, off in openai_schema._OFF_VALUES.items()})
    return props


def _content() -> Schema:
    part = {
        "type": "object",
        "properties": {"type": {"const": "text"}, "text": {"type": "string", "pattern": NO_NUL}},
        "required": ["type", "text"],
    }
    return {"anyOf": [{"type": "string", "pattern": NO_NUL}, {"type": "array", "items": part}]}


def chat_body(replica: ReplicaContext) -> Schema:
    """POST /v1/chat/completions: messages with a user turn, and the fields parse_chat reads."""
    message: Schema = {
        "type": "object",
        "properties": {"role": {"enum": sorted(openai_schema._ROLES)}, "content": _content(), "name": ANY},
        "required": ["role", "content"],
        "additionalProperties": False,
    }
    props = {key: value for key, value in _openai_common(replica).items() if key in openai_schema._CHAT_KEYS}
    props["messages"] = {
        "type": "array",
        "items": message,
        "minItems": 1,
        "maxItems": replica.cfg.max_chat_messages,
        "contains": {"properties": {"role": {"const": "user"}}},
    }
    if replica.cfg.system_prompt_mode == "reject":  # a system text is refused (a blank one is no text)
        said = {"type": "string", "pattern": NON_BLANK}
        system = {"role": {"enum": ["system", "developer"]}, "content": said}
        message["not"] = {"properties": system, "required": ["role", "content"]}
    body = {"type": "object", "properties": props, "required": ["messages"], "additionalProperties": False}
    return _openai_body(body, replica)


def _openai_body(body: Schema, replica: ReplicaContext) -> Schema:
    """max_completion_tokens stands in for max_tokens when that is absent (_sampling)."""
    bound = sampling(replica.engine.max_model_len)["max_tokens"]
    body["allOf"] = [rs.aliased("max_tokens", "max_completion_tokens", bound)]
    return body


def completion_body(replica: ReplicaContext) -> Schema:
    """POST /v1/completions: a prompt or a list of them (a stream takes one), and the other fields."""
    common = _openai_common(replica)
    props = {key: value for key, value in common.items() if key in openai_schema._COMPLETION_KEYS}
    props["prompt"] = _texts_or_one(replica.cfg.max_batch_texts)
    several = {"type": "array", "minItems": 2}
    streamed = {
        "properties": {"prompt": several, "stream": {"const": True}},
        "required": ["prompt", "stream"],
    }
    body = {"type": "object", "properties": props, "required": ["prompt"], "additionalProperties": False}
    return _openai_body({**body, "not": streamed}, replica)


def _libre_codes() -> list[str]:
    return [codes.libre_code(lang) for lang in LANGUAGES]


def libre_translate_body(replica: ReplicaContext) -> Schema:
    """POST /libretranslate/translate: q (one text or several), source (or auto), target, format."""
    ours = _libre_codes()
    return {
        "type": "object",
        "properties": {
            "q": _texts_or_one(replica.cfg.max_batch_texts),
            "source": language_enum(ours, auto=True),
            "target": language_enum(ours),
            "format": {"anyOf": [{"enum": list(LIBRE_FORMATS)}, FALSY]},  # false: text
            "alternatives": nullable({"type": "integer"}),
            "api_key": ANY,
        },
        "required": ["q", "source", "target"],
    }


def libre_detect_body(replica: ReplicaContext) -> Schema:
    one = {"type": "string", "pattern": _DETECTABLE}
    several = {"type": "array", "items": one, "minItems": 1, "maxItems": replica.cfg.max_batch_texts}
    props = {"q": {"anyOf": [one, several]}, "api_key": ANY}
    return {"type": "object", "properties": props, "required": ["q"]}


def file_part() -> Schema:
    """A document's file part: the ending of its name picks the format (documents.format_of), and its
    bytes must be a file of that format; no JSON Schema can say the second, so the 400 is declared."""
    endings = " ".join(sorted(documents._ENDINGS))
    return {
        "type": "string",
        "format": "binary",
        "description": f"A file part named with one of these endings: {endings}. Another ending, or bytes "
        "that are not a file of the format the ending names (UTF-8 text for the text formats), are a 400.",
    }


def libre_file_body(_replica: ReplicaContext) -> Schema:
    """POST /libretranslate/translate_file: a multipart file part and the languages."""
    ours = _libre_codes()
    props = {
        "file": file_part(),
        "source": language_enum(ours, auto=True),
        "target": language_enum(ours),
        "api_key": {"type": "string"},
    }
    return {"type": "object", "properties": props, "required": ["file", "source", "target"]}


def _deepl_codes(kind: str) -> list[str]:
    return [str(row["language"]) for row in codes.deepl_languages(kind)]


def deepl_translate_body(replica: ReplicaContext) -> Schema:
    """POST /v2/translate: the fields _check_names honours or takes with no effect; no others."""
    have = FAMILY_FEATURES[replica.translator.family]
    strings = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
    source = language_enum(_deepl_codes("source"))
    # absent, null or empty: detected (`source_lang=` is how a form leaves the field out)
    detected = nullable(source)
    detected["enum"] = [*detected["enum"], ""]
    props: dict[str, Schema] = {
        "text": _texts_or_one(replica.cfg.max_batch_texts),
        "source_lang": detected,
        "target_lang": language_enum(_deepl_codes("target")),
        "tag_handling": nullable({"type": "string", "enum": list(DEEPL_TAG_HANDLING)}),
        # any false value is no tags, as _tags reads it
        "ignore_tags": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}, FALSY]},
        "formality": {"type": "string", "enum": list(DEEPL_FORMALITY)},
        **dict.fromkeys(DEEPL_NO_EFFECT, ANY),
    }
    if CONTEXT in have:
        props["context"] = nullable({"type": "string", "pattern": NO_NUL})
    if STYLE in have:
        props["custom_instructions"] = strings
    body: Schema = {
        "type": "object",
        "properties": props,
        "required": ["text", "target_lang"],
        "additionalProperties": False,
    }
    if GLOSSARY in have:
        props["glossary_id"] = nullable({"type": "string", "minLength": 1, "pattern": NON_BLANK})
        # a glossary is for one language pair: the source must be named
        named = {"properties": {"source_lang": source}, "required": ["source_lang"]}
        body["dependentSchemas"] = {"glossary_id": named}
    return body


def deepl_glossary_fields() -> dict[str, Schema]:
    """One dictionary's fields, as _dictionary and parse_entries read them."""
    base = sorted({pair["source_lang"] for pair in g.language_pairs()})
    return {
        "source_lang": {"type": "string", "enum": base},
        "target_lang": {"type": "string", "enum": base},
        "entries": {"type": "string", "pattern": TERM_LINE},
        "entries_format": {"enum": ["tsv", "", None]},
    }


def _two_languages() -> Schema:
    """A dictionary's source and target differ (_dictionary): not one language twice."""
    base = deepl_glossary_fields()["source_lang"]["enum"]
    same = [{"properties": {"source_lang": {"const": c}, "target_lang": {"const": c}}} for c in base]
    return {"not": {"anyOf": same}}


def deepl_glossary_body(_replica: ReplicaContext) -> Schema:
    """POST /v2/glossaries: a name and one dictionary (one TSV entry per line)."""
    props = {"name": NAME, **deepl_glossary_fields()}
    required = ["name", "source_lang", "target_lang", "entries"]
    return {"type": "object", "properties": props, "required": required, **_two_languages()}


def deepl_multilingual_body(_replica: ReplicaContext) -> Schema:
    """POST /v3/glossaries: a name and dictionaries, one per language pair."""
    dictionary = {
        "type": "object",
        "properties": deepl_glossary_fields(),
        "required": ["source_lang", "target_lang", "entries"],
        **_two_languages(),
    }
    dictionaries = {"type": "array", "items": dictionary, "minItems": 1, "maxItems": 1}
    props = {"name": NAME, "dictionaries": dictionaries}
    return {"type": "object", "properties": props, "required": ["name", "dictionaries"]}


def deepl_document_body(_replica: ReplicaContext) -> Schema:
    """POST /v2/document: a multipart file part, target_lang, optional source_lang and formality."""
    props = {
        "file": file_part(),
        "target_lang": language_enum(_deepl_codes("target")),
        "source_lang": language_enum(_deepl_codes("source")),
        "formality": {"type": "string", "enum": list(DEEPL_FORMALITY)},
        "filename": {"type": "string"},
    }
    return {"type": "object", "properties": props, "required": ["file", "target_lang"]}


def deepl_document_key_body(_replica: ReplicaContext) -> Schema:
    """POST /v2/document/{id} and .../result: the document_key the upload answered."""
    props = {"document_key": {"type": "string", "minLength": 1}}
    return {"type": "object", "properties": props, "required": ["document_key"]}

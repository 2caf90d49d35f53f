"""JSON Schemas of the native and Immersive request bodies, built from the limits their parsers apply."""

from __future__ import annotations

from typing import Any

from hunyuan_serve.config.qa import QA_POLICIES
from hunyuan_serve.families import chimera
from hunyuan_serve.families.base import CONTEXT, GLOSSARY, PRESERVE_FORMAT, STYLE
from hunyuan_serve.families.build import FAMILY_FEATURES, feature_limits
from hunyuan_serve.languages import LANGUAGES
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.bounds import SAMPLING_BOUNDS
from hunyuan_serve.replica.context import ReplicaContext

Schema = dict[str, Any]
# A text the parsers take: not blank (str.strip() also strips the separators \x1c-\x1f and NEL, which
# JSON Schema's \s lacks) and without NUL.
NON_BLANK = "^[^\\x00]*[^\\s\\x00\\x1c-\\x1f\\x85][^\\x00]*$"
NO_NUL = "^[^\\x00]*$"
AUTO_CODE = "auto"
STREAM_OFF = {"const": False}


def text(**extra: Any) -> Schema:
    return {"type": "string", "minLength": 1, "pattern": NON_BLANK, **extra}


def nullable(schema: Schema) -> Schema:
    """The schema, or JSON null (a parser reads null as the field left out)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        out = {**schema, "type": [kind, "null"]}
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out
    return {"anyOf": [schema, {"type": "null"}]}


def no_null(schema: Any) -> Any:
    """The schema without JSON null, for a form body (a form field is a string: null cannot be sent)."""
    if isinstance(schema, list):
        return [no_null(each) for each in schema if each != {"type": "null"}]
    if not isinstance(schema, dict):
        return schema
    out = {key: no_null(value) for key, value in schema.items()}
    if isinstance(out.get("type"), list):
        kinds = [kind for kind in out["type"] if kind != "null"]
        out["type"] = kinds[0] if len(kinds) == 1 else kinds
    if isinstance(out.get("enum"), list):
        # and false and 0, which a form sends as the words "false" and "0"
        out["enum"] = [each for each in out["enum"] if each is not None and not _zero(each)]
    return out


def _zero(value: Any) -> bool:
    return type(value) in (bool, int, float) and value == 0


def language_enum(codes: list[str], *, auto: bool = False) -> Schema:
    return {"type": "string", "enum": [*codes, *([AUTO_CODE] if auto else [])]}


def our_codes() -> list[str]:
    return [lang.code for lang in LANGUAGES]


def sampling(max_model_len: int) -> dict[str, Schema]:
    """The sampling fields as parse_sampling checks them (replica/bounds.py); each may be null."""
    props: dict[str, Schema] = {}
    for name, (kind, low, high, low_open) in SAMPLING_BOUNDS.items():
        top = max_model_len - 1 if high is None else high
        field: Schema = {"type": kind, "maximum": top}
        field["exclusiveMinimum" if low_open else "minimum"] = low
        props[name] = nullable(field)
    # top_k 0 is refused: -1 turns it off, else at least 1
    props["top_k"] = {"anyOf": [{"type": "integer", "minimum": -1, "maximum": -1}, props["top_k"]]}
    props["top_k"]["anyOf"][1] = {**props["top_k"]["anyOf"][1], "not": {"const": 0}}
    return props


def _glossary(terms: int, chars: int) -> Schema:
    term = text(maxLength=chars)
    pair = {
        "type": "object",
        "properties": {"source": term, "target": term},
        "required": ["source", "target"],
        "additionalProperties": False,
    }
    as_map = {
        "type": "object",
        "additionalProperties": term,
        "propertyNames": {"minLength": 1, "maxLength": chars, "pattern": NON_BLANK},
        "maxProperties": terms,
    }
    return nullable({"anyOf": [as_map, {"type": "array", "items": pair, "maxItems": terms}]})


def features(replica: ReplicaContext) -> dict[str, Schema]:
    """The optional instructions the family has a prompt for (the others are refused)."""
    limits = feature_limits(replica.cfg)
    have = FAMILY_FEATURES[replica.translator.family]
    props: dict[str, Schema] = {}
    if GLOSSARY in have:
        props["glossary"] = _glossary(limits.glossary_terms, limits.term_chars)
    if CONTEXT in have:
        props["context"] = nullable({"type": "string", "pattern": NO_NUL, "maxLength": limits.context_chars})
    if STYLE in have:
        props["style"] = nullable({"type": "string", "pattern": NO_NUL, "maxLength": limits.style_chars})
    if PRESERVE_FORMAT in have:
        props["preserve_format"] = nullable({"type": "boolean"})
    return props


def translate_body(replica: ReplicaContext) -> Schema:
    """POST /translate: one of text or texts, the target, and the optional fields parse_fields reads."""
    cfg = replica.cfg
    codes = our_codes()
    props: dict[str, Schema] = {
        "text": text(),
        "texts": {"type": "array", "items": text(), "minItems": 1, "maxItems": cfg.max_batch_texts},
        # src_lang and tgt_lang are read only without source_lang and target_lang (see aliased)
        "source_lang": nullable(language_enum(codes, auto=True)),
        "src_lang": {},
        "target_lang": language_enum(codes),
        "tgt_lang": {},
        **sampling(replica.engine.max_model_len),
        **features(replica),
        "stream": {"type": "boolean"},
        "priority": nullable({"type": "string", "enum": list(priority.CLASSES)}),
        "qa": nullable({"type": "string", "enum": list(QA_POLICIES)}),
        "model": nullable({"type": "string", "enum": [replica.engine.model_name]}),
    }
    if cfg.chimera_url:
        count = {"type": "integer", "minimum": chimera.MIN_CANDIDATES, "maximum": chimera.MAX_CANDIDATES}
        shape = {"type": "object", "properties": {"candidates": count}, "additionalProperties": False}
        props["ensemble"] = nullable(shape)
    return {
        "type": "object",
        "properties": props,
        "additionalProperties": False,
        "oneOf": [
            {"required": ["text"], "not": {"required": ["texts"]}},
            # stream answers one text
            {
                "required": ["texts"],
                "not": {"required": ["text"]},
                "properties": {"stream": {"const": False}},
            },
        ],
        "anyOf": [{"required": ["target_lang"]}, {"required": ["tgt_lang"]}],
        "not": _together("stream", "preserve_format", "ensemble"),
        "allOf": [
            aliased("source_lang", "src_lang", nullable(language_enum(codes, auto=True))),
            aliased("target_lang", "tgt_lang", language_enum(codes)),
        ],
    }


def aliased(name: str, alias: str, schema: Schema) -> Schema:
    """The alias is read (and checked) only when the name itself is absent."""
    return {"if": {"not": {"required": [name]}}, "then": {"properties": {alias: schema}}}


def _together(*fields: str) -> Schema:
    """Refused: any two of these switched on at once (a stream or an ensemble answers whole texts)."""
    on = {
        name: {"properties": {name: {"type": "object"} if name == "ensemble" else {"const": True}}}
        for name in fields
    }
    pairs = [(a, b) for i, a in enumerate(fields) for b in fields[i + 1 :]]
    return {"anyOf": [{"required": [a, b], "allOf": [on[a], on[b]]} for a, b in pairs]}


def immersive_body(replica: ReplicaContext) -> Schema:
    """POST /immersive/translate: text_list, target_lang, an optional source (auto when absent)."""
    codes = our_codes()
    return {
        "type": "object",
        "properties": {
            "text_list": {
                "type": "array",
                "items": text(),
                "minItems": 1,
                "maxItems": replica.cfg.max_batch_texts,
            },
            "source_lang": nullable(language_enum(codes, auto=True)),
            "target_lang": language_enum(codes),
        },
        "required": ["text_list", "target_lang"],
    }

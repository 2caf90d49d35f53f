"""The OpenAPI document a client of the front reads: each operation's bodies, statuses and error shapes."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response

from hunyuan_serve import __version__
from hunyuan_serve.edge.dialects import (
    DIALECTS,
    EDGE_ERRORS,
    POOL_ERRORS,
    Dialect,
    dialect_of,
)
from hunyuan_serve.qa.flags import HEADER as QA_HEADER
from hunyuan_serve.replica.apis import compat_schemas as cs
from hunyuan_serve.replica.apis import deepl, deepl_languages, libretranslate, native, openai
from hunyuan_serve.replica.apis import request_schemas as rs
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.usage import QUOTA_EXCEEDED

Schema = dict[str, Any]
BodyOf = Callable[[ReplicaContext], Schema]
# Not in the front's document: a Chimera replica's /fuse is reached through /_hs/pool/ only, and
# /metrics is Prometheus' text behind nginx.expose_metrics.
HIDDEN = ("/fuse", "/metrics")
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
SSE = "text/event-stream"
# What every admitted request may meet (http.Gate, Admission): not ready, overloaded, the engine failed.
GATE = ((503, "overloaded"),)
# Reading a body (read_body, decode_body): too large, not UTF-8 JSON, not an object.
BODY = ((413, "body_too_large"), (400, "invalid_json"), (422, "invalid_request"))
# Translating it under the deadline (guarded, request_fault), billed per key (Usage.check).
WORK = ((504, "deadline_exceeded"), (400, "invalid_request"), (429, QUOTA_EXCEEDED))
# Each API's own renderer: the status it answers an ApiError with (422 is 400 to OpenAI and DeepL...).
RENDERERS: dict[str, Callable[[ApiError], Response]] = {
    "native": native.render_error,
    "immersive": native.render_error,
    "openai": openai.render_error,
    "deepl": deepl.render_error,
    "libretranslate": libretranslate.render_error,
}


@dataclass(frozen=True)
class Op:
    """What one operation takes and may answer: its body (by media type), its own refusals, successes."""

    body: BodyOf | None = None
    media: tuple[str, ...] = (JSON,)
    errors: tuple[tuple[int, str], ...] = ()
    gated: bool = True
    success: Mapping[int, tuple[str, ...]] = field(default_factory=lambda: {200: (JSON,)})
    params: tuple[Schema, ...] = ()
    edge: bool = True  # behind the key check and Nginx's limits and refusals
    checked: bool = False  # a translation: its answer checks' summary in X-Hunyuan-QA (replica/review.py)
    creates: str = ""  # the field of its 201 body naming what it made: linked to the paths under it


_TRANSLATE = (*GATE, *BODY, *WORK, (400, "unsupported_language"), (413, "too_many_texts"))
_COMPAT = (*_TRANSLATE, (413, "text_too_long"))
_STORE = ((503, "store_unavailable"),)
_GLOSSARY = (*GATE, *_STORE, (400, "invalid_request"), (404, "glossary_not_found"))
_DOCUMENT = (*GATE, *_STORE, (400, "invalid_request"), (404, "document_not_found"))
_COMPAT_MEDIA = (JSON, FORM)
_RESOURCE = {
    "name": "resource",
    "in": "query",
    "required": True,
    "schema": {"type": "string", "enum": [*deepl_languages.RESOURCES, *deepl_languages.ABSENT]},
}
_LANGS = {"name": "type", "in": "query", "schema": {"type": "string", "enum": ["source", "target"]}}
# The translation memories (replica/apis/memories.py, tmserver.py; docs/memory.md).
_MEMORY = (*GATE, *_STORE, (400, "invalid_request"))
_FILE = {"type": "string", "format": "binary"}
_WHICH = {"name": "memory", "in": "query", "schema": {"type": "string", "enum": ["own", "shared"]}}
_FORMAT = {"name": "format", "in": "query", "schema": {"type": "string", "enum": ["tmx", "csv", "tsv"]}}
_IMPORT = tuple(
    {"name": n, "in": "query", "schema": {"type": "string"}} for n in ("file", "source_lang", "target_lang")
)


def _query(name: str) -> Schema:
    """A glossary's language named in the query (v3's entries: the dictionary to read)."""
    schema = cs.deepl_glossary_fields()[name]
    return {"name": name, "in": "query", "required": True, "schema": schema}


OPERATIONS: dict[tuple[str, str], Op] = {
    # Nginx answers /health itself (no key, no limit); a replica's own has the same statuses.
    ("get", "/health"): Op(gated=False, edge=False, success={200: (JSON,), 503: (JSON,)}),
    ("post", "/translate"): Op(
        rs.translate_body,
        errors=(*_TRANSLATE, (404, "model_not_found"), (413, "text_too_long"), (503, "chimera_failed")),
        success={200: (JSON, SSE)},
        checked=True,
    ),
    ("get", "/languages"): Op(gated=False),
    ("post", "/immersive/translate"): Op(rs.immersive_body, errors=_COMPAT, checked=True),
    ("post", "/v1/chat/completions"): Op(
        cs.chat_body, errors=(*_COMPAT, (404, "model_not_found")), success={200: (JSON, SSE)}, checked=True
    ),
    ("post", "/v1/completions"): Op(
        cs.completion_body,
        errors=(*_COMPAT, (404, "model_not_found")),
        success={200: (JSON, SSE)},
        checked=True,
    ),
    ("get", "/v1/models"): Op(gated=False),
    ("get", "/v1/models/{model}"): Op(gated=False, errors=((404, "model_not_found"),)),
    ("post", "/libretranslate/translate"): Op(cs.libre_translate_body, _COMPAT_MEDIA, _COMPAT, checked=True),
    ("post", "/libretranslate/detect"): Op(cs.libre_detect_body, _COMPAT_MEDIA, (*GATE, *BODY)),
    ("get", "/libretranslate/languages"): Op(gated=False),
    ("post", "/libretranslate/translate_file"): Op(
        cs.libre_file_body, (MULTIPART,), (*_DOCUMENT, *WORK, (413, "document_too_large"))
    ),
    ("get", "/libretranslate/download_file/{name}"): Op(
        errors=(*_DOCUMENT, (409, "document_not_ready"), (500, "document_error")), success={200: ("*/*",)}
    ),
    ("post", "/v2/translate"): Op(
        cs.deepl_translate_body, _COMPAT_MEDIA, (*_COMPAT, *_GLOSSARY), checked=True
    ),
    ("get", "/v2/languages"): Op(errors=((400, "invalid_request"), *GATE), params=(_LANGS,)),
    ("post", "/v2/languages"): Op(errors=((400, "invalid_request"), *GATE), params=(_LANGS,)),
    ("get", "/v3/languages"): Op(errors=((400, "invalid_request"), *GATE), params=(_RESOURCE,)),
    ("get", "/v2/usage"): Op(errors=(*GATE, *_STORE)),
    ("post", "/v2/usage"): Op(errors=(*GATE, *_STORE)),
    ("get", "/v2/glossaries"): Op(errors=_GLOSSARY),
    ("post", "/v2/glossaries"): Op(
        cs.deepl_glossary_body,
        _COMPAT_MEDIA,
        (*_GLOSSARY, *BODY),
        success={201: (JSON,)},
        creates="glossary_id",
    ),
    ("get", "/v2/glossaries/{glossary_id}"): Op(errors=_GLOSSARY),
    ("delete", "/v2/glossaries/{glossary_id}"): Op(errors=_GLOSSARY, success={204: ()}),
    ("get", "/v2/glossaries/{glossary_id}/entries"): Op(
        errors=_GLOSSARY, success={200: ("text/tab-separated-values",)}
    ),
    ("get", "/v2/glossary-language-pairs"): Op(gated=False),
    ("post", "/v2/document"): Op(
        cs.deepl_document_body, (MULTIPART,), (*_DOCUMENT, (413, "document_too_large"))
    ),
    ("post", "/v2/document/{document_id}"): Op(cs.deepl_document_key_body, _COMPAT_MEDIA, _DOCUMENT),
    ("post", "/v2/document/{document_id}/result"): Op(
        cs.deepl_document_key_body,
        _COMPAT_MEDIA,
        (*_DOCUMENT, (503, "document_not_ready")),
        success={200: ("*/*",)},
    ),
    ("get", "/v3/glossaries"): Op(errors=_GLOSSARY),
    ("post", "/v3/glossaries"): Op(
        cs.deepl_multilingual_body,
        (JSON,),
        (*_GLOSSARY, *BODY),
        success={201: (JSON,)},
        creates="glossary_id",
    ),
    ("get", "/v3/glossaries/{glossary_id}"): Op(errors=_GLOSSARY),
    ("delete", "/v3/glossaries/{glossary_id}"): Op(errors=_GLOSSARY, success={204: ()}),
    ("get", "/v3/glossaries/{glossary_id}/entries"): Op(
        errors=_GLOSSARY, params=(_query("source_lang"), _query("target_lang"))
    ),
    ("post", "/memories"): Op(
        lambda _: _FILE,
        ("application/octet-stream",),
        (*_MEMORY, (413, "body_too_large"), (400, "invalid_memory_file"), (413, "memory_full")),
        success={201: (JSON,)},
        params=(*_IMPORT, _FORMAT),
    ),
    ("get", "/memories"): Op(errors=_MEMORY, params=(_WHICH,)),
    ("delete", "/memories"): Op(errors=(*_MEMORY, (404, "not_found")), success={204: ()}),
    ("get", "/memories/export"): Op(errors=_MEMORY, success={200: ("*/*",)}, params=(_FORMAT, _WHICH)),
    ("delete", "/memories/imports/{import_id}"): Op(errors=(*_MEMORY, (404, "not_found")), success={204: ()}),
    ("get", "/tmserver/languages/"): Op(errors=(*GATE, *_STORE)),
    ("get", "/tmserver/{src}/{tgt}/unit/{text}"): Op(errors=(*GATE, *_STORE)),
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}.get(
        type(value), "object"
    )


def infer(samples: list[Any]) -> Schema:
    """The narrowest schema the samples share: objects key by key (every key they all hold required)."""
    if all(isinstance(each, dict) for each in samples):
        keys = list(dict.fromkeys(key for each in samples for key in each))
        props = {key: infer([each[key] for each in samples if key in each]) for key in keys}
        required = [key for key in keys if all(key in each for each in samples)]
        return {"type": "object", "properties": props, "required": required, "additionalProperties": False}
    kinds = sorted({_json_type(each) for each in samples})
    return {"type": kinds[0] if len(kinds) == 1 else kinds}


# Statuses and codes an error body is sampled with, to infer each API's error shape from its function.
_SAMPLE_STATUSES = (400, 401, 403, 404, 409, 413, 422, 429, 456, 500, 503, 504)
_SAMPLE_CODES = ("invalid_request", "invalid_api_key", "peer_refused", "model_not_found", *EDGE_ERRORS)


def error_schema(dialect: Dialect) -> Schema:
    """The JSON Schema of this API's error body, inferred from its shape function (edge/dialects.py)."""
    samples = [dialect.error(code, "m", status) for status in _SAMPLE_STATUSES for code in _SAMPLE_CODES]
    return infer(samples)


def error_name(dialect: Dialect) -> str:
    return f"{dialect.name.capitalize()}Error"


def statuses(dialect: Dialect, path: str, op: Op) -> list[int]:
    """Every status this operation can answer besides its successes: its own and the gate's refusals as
    the API renders them, the key check's, and Nginx's own (edge/dialects.py tables)."""
    raw = [*op.errors, *(GATE if op.gated else ())]
    render = RENDERERS[dialect.name]
    out = {render(ApiError(status, code, "")).status_code for status, code in raw}
    if not op.edge:
        return sorted(out)
    out |= {dialect.missing_status, dialect.wrong_status}
    edge = [status for code, (status, _) in EDGE_ERRORS.items() if code != "body_too_large" or op.body]
    out |= set(edge)
    if path in ("/translate", "/v1/chat/completions", "/v1/completions"):  # routed by model with pools
        out |= {status for status, _ in POOL_ERRORS.values()}
    return sorted(out)


def _responses(dialect: Dialect, path: str, op: Op) -> Schema:
    responses: Schema = {}
    for status, media in op.success.items():
        content: Schema = {kind: {"schema": {}} for kind in media}
        responses[str(status)] = {"description": "Success", **({"content": content} if content else {})}
        if op.checked:
            responses[str(status)]["headers"] = {QA_HEADER: _QA}
    ref = {"schema": {"$ref": f"#/components/schemas/{error_name(dialect)}"}}
    retry = {"Retry-After": {"description": "Seconds to wait before retrying", "schema": {"type": "string"}}}
    for status in statuses(dialect, path, op):
        if str(status) in responses:
            continue
        described: Schema = {"description": _REASONS.get(status, "Error"), "content": {JSON: ref}}
        if status in (429, 503):
            described["headers"] = retry
        responses[str(status)] = described
    return responses


# Not sent when the answer checks are off (replica.qa, a key's qa=, the request's own).
_QA = {"description": '"ok", or "flagged F/N: i=check,..."', "schema": {"type": "string"}}
_REASONS = {
    400: "Bad request: the message names the field at fault",
    401: "No API key (or a wrong one, OpenAI)",
    403: "Wrong API key (no key: DeepL, LibreTranslate), or not the gateway's peer",
    404: "Not found: the model, glossary or document named",
    409: "The file is not translated yet",
    413: "Too large: the body, a text's prompt, or too many texts",
    422: "A field has the wrong type or value",
    429: "Too many requests, or the key's character limit",
    456: "The key's character limit is reached (DeepL's status for it)",
    500: "The document's translation failed",
    503: "No replica can take it now (not ready, busy, a store down); Retry-After says when to retry",
    504: "No answer within the deadline",
}


def _request_body(op: Op, replica: ReplicaContext) -> Schema | None:
    if op.body is None:
        return None
    schema = op.body(replica)
    content = {kind: {"schema": schema if kind == JSON else rs.no_null(schema)} for kind in op.media}
    if MULTIPART in op.media:
        content[MULTIPART]["encoding"] = {"file": {"contentType": "application/octet-stream"}}
    return {"required": True, "content": content}


def _operation_id(method: str, path: str) -> str:
    return method + "_" + re.sub(r"[^a-z0-9]+", "_", path.lower()).strip("_")


def _links(path: str, field: str) -> Schema:
    """OpenAPI links from what a POST made to the operations on it, under its own path only: a v2
    glossary is a v3 one too (as at DeepL), but a link across versions has a stateful fuzzer delete it
    through one and read it through the other, and take that 404 for a glossary lost."""
    under = f"{path}/{{{field}}}"
    return {
        _operation_id(method, each): {
            "operationId": _operation_id(method, each),
            "parameters": {field: f"$response.body#/{field}"},
        }
        for method, each in OPERATIONS
        if each == under or each.startswith(under + "/")
    }


def declare(spec: Schema, replica: ReplicaContext) -> None:
    """Each operation's id, tag, body, parameters and responses, from OPERATIONS (in place)."""
    for path in HIDDEN:
        spec["paths"].pop(path, None)
    for path, item in spec["paths"].items():
        dialect = dialect_of(path)
        for method, operation in item.items():
            op = OPERATIONS.get((method, path), Op(gated=False))
            operation["operationId"] = _operation_id(method, path)
            operation["tags"] = [dialect.name]
            body = _request_body(op, replica)
            if body is not None:
                operation["requestBody"] = body
            if op.params:
                operation["parameters"] = [*operation.get("parameters", []), *op.params]
            operation["responses"] = _responses(dialect, path, op)
            if op.creates:
                operation["responses"]["201"]["links"] = _links(path, op.creates)
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    for dialect in DIALECTS:
        schemas[error_name(dialect)] = error_schema(dialect)


def document(app: FastAPI, replica: ReplicaContext) -> Schema:
    """The whole document, its server the front it is read from (every path is the same there)."""
    with warnings.catch_warnings():  # FastAPI's ids of a route of two methods: ours replace them
        warnings.simplefilter("ignore", UserWarning)
        spec = get_openapi(
            title="hunyuan-serve",
            version=__version__,
            description="The translation APIs: native, OpenAI, DeepL, LibreTranslate, Immersive.",
            routes=app.routes,
        )
    spec["servers"] = [{"url": "/", "description": "the front (Nginx) this document was read from"}]
    declare(spec, replica)
    if _keyed(app):
        _security(spec)
    return spec


def _keyed(app: FastAPI) -> bool:
    return bool(getattr(app.state, "keyed", False))


def _security(spec: Schema) -> None:
    """With a keys file: a Bearer key (DeepL's DeepL-Auth-Key scheme, ?token= and ?api_key= also do)."""
    schemes = spec["components"].setdefault("securitySchemes", {})
    schemes["bearer"] = {"type": "http", "scheme": "bearer"}
    schemes["token"] = {"type": "apiKey", "in": "query", "name": "token"}
    for path, item in spec["paths"].items():
        if path == "/health":
            continue
        for operation in item.values():
            operation["security"] = [{"bearer": []}, {"token": []}]


def install(app: FastAPI, replica: ReplicaContext) -> None:
    """The app's /openapi.json answers this document, built once on first read."""
    cached: list[Schema] = []

    def build() -> Schema:
        if not cached:
            cached.append(document(app, replica))
        return cached[0]

    app.openapi = build  # type: ignore[method-assign]


def paths_of(spec: Schema) -> Iterable[tuple[str, str]]:
    return ((method, path) for path, item in spec["paths"].items() for method in item)

"""The OpenAPI document a client of the front reads: each operation's bodies, statuses and error shapes."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from hunyuan_serve import __version__
from hunyuan_serve.edge.dialects import (
    DIALECTS,
    EDGE_ERRORS,
    POOL_ERRORS,
    Dialect,
    dialect_of,
)
from hunyuan_serve.qa.flags import HEADER as QA_HEADER
from hunyuan_serve.replica.apis import registry
from hunyuan_serve.replica.apis import request_schemas as rs
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.openapi import security
from hunyuan_serve.replica.openapi.operations import GATE, JSON, MULTIPART, Op, Schema


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
    out = {dialect.status_of(code, status) for status, code in raw}
    if not op.edge:
        return sorted(out)
    out |= {dialect.keys.missing_status, dialect.keys.wrong_status}
    edge = [status for code, (status, _) in EDGE_ERRORS.items() if code != "body_too_large" or op.body]
    out |= set(edge)
    if path in dialect.routed:  # routed by model with several pools
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


def _links(path: str, field: str, operations: Mapping[tuple[str, str], Op]) -> Schema:
    """OpenAPI links from what a POST made to the operations on it, under its own path only: a v2
    glossary is a v3 one too (as at DeepL), but a link across versions has a stateful fuzzer delete it
    through one and read it through the other, and take that 404 for a glossary lost."""
    under = f"{path}/{{{field}}}"
    return {
        _operation_id(method, each): {
            "operationId": _operation_id(method, each),
            "parameters": {field: f"$response.body#/{field}"},
        }
        for method, each in operations
        if each == under or each.startswith(under + "/")
    }


def declare(spec: Schema, replica: ReplicaContext) -> None:
    """Each operation's id, tag, body, parameters and responses, from the OPERATIONS of the module
    serving it (its API's declaration names the module), in place."""
    operations = registry.operations()
    for path, item in spec["paths"].items():
        dialect = dialect_of(path)
        for method, operation in item.items():
            op = operations.get((method, path), Op(gated=False))
            operation["operationId"] = _operation_id(method, path)
            operation["tags"] = [dialect.name]
            body = _request_body(op, replica)
            if body is not None:
                operation["requestBody"] = body
            if op.params:
                operation["parameters"] = [*operation.get("parameters", []), *op.params]
            operation["responses"] = _responses(dialect, path, op)
            if op.creates:
                operation["responses"]["201"]["links"] = _links(path, op.creates, operations)
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
        security.declare_keys(spec)
    return spec


def _keyed(app: FastAPI) -> bool:
    return bool(getattr(app.state, "keyed", False))


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

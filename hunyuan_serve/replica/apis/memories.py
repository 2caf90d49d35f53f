"""The translation memories over HTTP: import, list, export and delete a key's memory (native shape)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from hunyuan_serve.languages import UnknownLanguage, find_language
from hunyuan_serve.memory import ops
from hunyuan_serve.memory.pairs import FORMATS, memory_format
from hunyuan_serve.memory.tmx import MemoryFileInvalid
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.apis import request_schemas as rs
from hunyuan_serve.replica.context import ReplicaContext, current
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.http import read_body
from hunyuan_serve.replica.openapi.operations import BODY, JSON, MEMORY_CALL, OCTETS, Op, Operations, Schema
from hunyuan_serve.replica.schema import decode_body
from hunyuan_serve.replica.usage import key_label
from hunyuan_serve.storage.backend import StoreUnavailable
from hunyuan_serve.storage.memory import SHARED, MemoryFull

router = APIRouter()
ReplicaDep = Annotated[ReplicaContext, Depends(current)]
MEDIA = {"tmx": "application/x-tmx+xml", "csv": "text/csv; charset=utf-8", "tsv": "text/tab-separated-values"}


async def memory_call(work: Awaitable[Any]) -> Any:
    """A store call, its failure a 503 (Nginx tries another replica; a client retries a 503)."""
    try:
        return await work
    except StoreUnavailable as err:
        raise ApiError(503, "store_unavailable", f"memory store unavailable: {err}") from None


def _owner(call: Call) -> str:
    """Which memory the call reads: its key's (or the open one's, without keys), or ?memory=shared."""
    which = call.request.query_params.get("memory", "own")
    if which not in ("own", "shared"):
        raise ApiError(400, "invalid_request", "memory must be own or shared")
    return SHARED if which == "shared" else call.owner or ""


def _who(call: Call) -> str:
    """Provenance: the key's label (its id's first characters, as the request log shows it)."""
    return f"key {key_label(call.owner)}" if call.owner else "no key (a replica without keys)"


async def _import(replica: ReplicaContext, call: Call) -> Response:
    query, cfg = call.request.query_params, replica.cfg
    name = query.get("file", "")
    try:
        fmt = memory_format(name, query.get("format"))
    except MemoryFileInvalid as err:
        raise ApiError(400, "invalid_request", str(err)) from None
    data = await read_body(call.request, cfg.memory_max_import_bytes)
    languages = (query.get("source_lang"), query.get("target_lang"))
    blank = query.get("blank", "skip")
    if blank not in ("skip", "keep"):
        raise ApiError(400, "invalid_request", "blank must be skip (an empty target is untranslated) or keep")
    owner = call.owner or ""
    try:
        made = ops.import_file(
            replica.recall.store,
            owner,
            name or f"upload.{fmt}",
            _who(call),
            data,
            fmt,
            languages,
            cfg.memory_max_units,
            keep_blank=blank == "keep",
        )
        origin = await memory_call(made)
    except MemoryFileInvalid as err:
        raise ApiError(400, "invalid_memory_file", str(err)) from None
    except MemoryFull as err:
        raise ApiError(413, "memory_full", str(err)) from None
    replica.recall.forget(owner)  # this replica's next lookup sees it at once, the others within a refresh
    call.log.update(memory_import=origin.id, memory_units=origin.units)
    return JSONResponse(ops.origin_json(origin), status_code=201)


async def _list(replica: ReplicaContext, call: Call) -> Response:
    owner = _owner(call)
    found = await memory_call(replica.recall.store.origins(owner))
    memory = "shared" if owner == SHARED else "own"
    return JSONResponse({"memory": memory, "imports": [ops.origin_json(each) for each in found]})


async def _export(replica: ReplicaContext, call: Call) -> Response:
    given = call.request.query_params.get("format", "tmx")
    if given not in FORMATS:
        raise ApiError(400, "invalid_request", f"format must be one of {', '.join(FORMATS)}")
    data = await memory_call(ops.export_file(replica.recall.store, _owner(call), given))
    disposition = {"Content-Disposition": f'attachment; filename="memory.{given}"'}
    return Response(data, media_type=MEDIA[given], headers=disposition)


async def _delete(replica: ReplicaContext, import_id: str | None, call: Call) -> Response:
    removed = await memory_call(replica.recall.store.delete(call.owner or "", import_id))
    replica.recall.forget(call.owner or "")
    if removed < 0:
        raise ApiError(
            404, "not_found", "no such import in this key's memory" if import_id else "the memory is empty"
        )
    call.log["memory_deleted"] = removed
    return Response(status_code=204)


def _lookup_pair(body: dict[str, Any]) -> tuple[str, str]:
    try:
        return find_language(str(body.get("source_lang"))).code, find_language(
            str(body.get("target_lang"))
        ).code
    except UnknownLanguage as err:
        raise ApiError(400, "unsupported_language", f"source_lang and target_lang: {err}") from None


async def _lookup(replica: ReplicaContext, call: Call) -> Response:
    """Texts whole, as a file has them (spaces around them, symbols only): the memory's target of each,
    or null; no engine. A client asks so before it trims what it sends to be translated."""
    body = decode_body(await call.body())
    texts = body.get("texts")
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ApiError(422, "invalid_request", "texts must be a list of strings")
    if len(texts) > replica.cfg.max_batch_texts:
        raise ApiError(
            413, "too_many_texts", f"at most {replica.cfg.max_batch_texts} texts (max_batch_texts)"
        )
    found, held = await memory_call(replica.recall.whole(call.owner, _lookup_pair(body), texts))
    call.log.update(texts=len(texts), memory_exact=len(found))
    # memory: whether the caller has any of this pair, so a client stops asking when it has none.
    return JSONResponse({"translations": [found.get(t) for t in texts], "memory": held})


def _serve(work: Callable[..., Awaitable[Response]], *args: Any) -> Callable[[Call], Awaitable[Response]]:
    return functools.partial(work, *args)


@router.post("/memories")
async def import_memory(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _serve(_import, replica))


@router.get("/memories")
async def list_memory(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _serve(_list, replica))


@router.post("/memories/lookup")
async def lookup_memory(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _serve(_lookup, replica))


@router.get("/memories/export")
async def export_memory(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _serve(_export, replica))


@router.delete("/memories")
async def delete_memory(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _serve(_delete, replica, None))


@router.delete("/memories/imports/{import_id}")
async def delete_import(import_id: str, request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _serve(_delete, replica, import_id))


def _lookup_body(replica: ReplicaContext) -> Schema:
    """POST /memories/lookup: a language pair of ours and the texts, whole."""
    texts = {"type": "array", "items": {"type": "string"}, "maxItems": replica.cfg.max_batch_texts}
    codes = rs.language_enum(rs.our_codes())
    return {
        "type": "object",
        "required": ["source_lang", "target_lang", "texts"],
        "properties": {"source_lang": codes, "target_lang": codes, "texts": texts},
    }


_FILE = {"type": "string", "format": "binary"}
_WHICH = {"name": "memory", "in": "query", "schema": {"type": "string", "enum": ["own", "shared"]}}
_FORMAT = {"name": "format", "in": "query", "schema": {"type": "string", "enum": ["tmx", "csv", "tsv"]}}
_BLANK = {"name": "blank", "in": "query", "schema": {"type": "string", "enum": ["skip", "keep"]}}
_IMPORT: tuple[Schema, ...] = (
    *(
        {"name": n, "in": "query", "schema": {"type": "string"}}
        for n in ("file", "source_lang", "target_lang")
    ),
    _BLANK,
)
# What the app mounts and what the OpenAPI document says of each operation (edge/dialects.py names us).
ROUTERS = (router,)
OPERATIONS: Operations = {
    ("post", "/memories"): Op(
        lambda _: _FILE,
        (OCTETS,),
        (*MEMORY_CALL, (413, "body_too_large"), (400, "invalid_memory_file"), (413, "memory_full")),
        success={201: (JSON,)},
        params=(*_IMPORT, _FORMAT),
    ),
    ("get", "/memories"): Op(errors=MEMORY_CALL, params=(_WHICH,)),
    ("delete", "/memories"): Op(errors=(*MEMORY_CALL, (404, "not_found")), success={204: ()}),
    ("post", "/memories/lookup"): Op(
        _lookup_body, errors=(*MEMORY_CALL, *BODY, (400, "unsupported_language"), (413, "too_many_texts"))
    ),
    ("get", "/memories/export"): Op(errors=MEMORY_CALL, success={200: ("*/*",)}, params=(_FORMAT, _WHICH)),
    ("delete", "/memories/imports/{import_id}"): Op(
        errors=(*MEMORY_CALL, (404, "not_found")), success={204: ()}
    ),
}

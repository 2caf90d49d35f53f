"""The translation memories over HTTP: import, list, export and delete a key's memory (native shape)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from hunyuan_serve.memory import ops
from hunyuan_serve.memory.pairs import FORMATS, memory_format
from hunyuan_serve.memory.tmx import MemoryFileInvalid
from hunyuan_serve.replica.apis.native import render_error
from hunyuan_serve.replica.context import ReplicaContext, current
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.http import Call, read_body
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


def _serve(work: Callable[..., Awaitable[Response]], *args: Any) -> Callable[[Call], Awaitable[Response]]:
    return functools.partial(work, *args)


@router.post("/memories")
async def import_memory(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _serve(_import, replica), render_error)


@router.get("/memories")
async def list_memory(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _serve(_list, replica), render_error)


@router.get("/memories/export")
async def export_memory(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _serve(_export, replica), render_error)


@router.delete("/memories")
async def delete_memory(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _serve(_delete, replica, None), render_error)


@router.delete("/memories/imports/{import_id}")
async def delete_import(import_id: str, request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _serve(_delete, replica, import_id), render_error)

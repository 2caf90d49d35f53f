"""Immersive Translate's custom API at /immersive/translate: text_list in, translations out, one core."""

from __future__ import annotations

import functools
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from hunyuan_serve.languages import UnknownLanguage, find_language, is_auto
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.apis import codes, compat
from hunyuan_serve.replica.apis import request_schemas as rs
from hunyuan_serve.replica.context import ReplicaContext, current
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.openapi.operations import COMPAT, Op, Operations

# The extension's "Custom API" setting takes any URL; this one sits beside the other dialects' prefixes.
PATH = "/immersive/translate"
router = APIRouter()
ReplicaDep = Annotated[ReplicaContext, Depends(current)]


def _code(value: Any, name: str, auto_ok: bool) -> str:
    if value is None or value == "":
        if auto_ok:
            return "auto"
        raise ApiError(422, "missing_field", f"{name} is required")
    if not isinstance(value, str):
        raise ApiError(422, "invalid_parameter", f"{name} must be a language code string")
    if auto_ok and is_auto(value):
        return "auto"
    try:
        return find_language(value).code
    except UnknownLanguage as err:
        raise ApiError(400, "unsupported_language", str(err)) from None


def _text_list(value: Any, limit: int) -> list[str]:
    if not isinstance(value, list):
        raise ApiError(422, "invalid_parameter", "text_list must be a list of strings")
    if not value:
        raise ApiError(422, "empty_text", "text_list must not be empty")
    if len(value) > limit:
        raise ApiError(413, "too_many_texts", f"{len(value)} texts in one request; the limit is {limit}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise ApiError(422, "invalid_parameter", f"text_list[{index}] must be a string")
        if not item.strip():
            raise ApiError(422, "empty_text", f"text_list[{index}] is empty or only whitespace")
    return value


async def _translate(replica: ReplicaContext, call: Call) -> Response:
    fields = await compat.read_fields(call)
    texts = _text_list(fields.get("text_list"), replica.cfg.max_batch_texts)
    call.settle(replica.admission, None, len(texts))  # more than one text: bulk unless told otherwise
    source = _code(fields.get("source_lang"), "source_lang", auto_ok=True)
    target = _code(fields.get("target_lang"), "target_lang", auto_ok=False)
    req = compat.build_request(replica, {"texts": texts, "source_lang": source, "target_lang": target})
    done = await compat.translate(replica, call, req)
    translations = [
        {"detected_source_lang": codes.immersive_code(found.language), "text": text}
        for text, found in zip(done.texts, done.sources, strict=True)
    ]
    headers = {"X-Request-ID": call.id, **done.outcome.verdicts.headers()}
    return JSONResponse({"translations": translations}, headers=headers)


@router.post(PATH)
async def translate(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_translate, replica))


# What the app mounts and what the OpenAPI document says of each operation (edge/dialects.py names us).
ROUTERS = (router,)
OPERATIONS: Operations = {("post", PATH): Op(rs.immersive_body, errors=COMPAT, checked=True)}

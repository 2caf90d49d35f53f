"""LibreTranslate's API under /libretranslate/: translate, languages, detect and files, over the one core."""

from __future__ import annotations

import asyncio
import functools
import urllib.parse
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from hunyuan_serve import detect
from hunyuan_serve.edge.dialects import LIBRETRANSLATE
from hunyuan_serve.languages import AUTO, LANGUAGES, Language, UnknownLanguage, is_auto
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.apis import codes, compat
from hunyuan_serve.replica.apis import compat_schemas as cs
from hunyuan_serve.replica.apis import deepl_documents as documents
from hunyuan_serve.replica.apis.compat_fields import LIBRE_FORMATS
from hunyuan_serve.replica.context import ReplicaContext, current
from hunyuan_serve.replica.documents import jobs as doc_jobs
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.http import guarded
from hunyuan_serve.replica.openapi.operations import (
    BODY,
    COMPAT,
    COMPAT_MEDIA,
    DOCUMENT_CALL,
    GATE,
    MULTIPART,
    WORK,
    Op,
    Operations,
)
from hunyuan_serve.storage.jobs import Job

PREFIX = "/libretranslate"
router = APIRouter(prefix=PREFIX)
ReplicaDep = Annotated[ReplicaContext, Depends(current)]
# LibreTranslate's CORS header on every answer, as declared for its errors (edge/dialects.py).
_CORS = LIBRETRANSLATE.headers


def _bad(message: str) -> ApiError:
    return ApiError(400, "invalid_request", f"Invalid request: {message}")


def _language(value: Any, name: str, auto_ok: bool) -> Language:
    if value is None or value == "" or value == []:
        raise _bad(f"missing {name} parameter")
    if not isinstance(value, str):
        raise _bad(f"{name} must be a language code string")
    if auto_ok and is_auto(value):
        return AUTO
    try:
        return codes.libre_language(value)
    except UnknownLanguage:
        raise ApiError(400, "unsupported_language", f"{value} is not supported") from None


def _texts(q: Any, limit: int) -> tuple[list[str], bool]:
    if q is None or q == "" or q == []:
        raise _bad("missing q parameter")
    batch = isinstance(q, list)
    items = q if batch else [q]
    if len(items) > limit:
        raise _bad(f"request ({len(items)}) exceeds text limit ({limit})")
    for index, item in enumerate(items):
        where = f"q[{index}]" if batch else "q"
        if not isinstance(item, str):
            raise _bad(f"{where} must be a string")
        if not item.strip():
            raise _bad(f"{where} is empty")
    return items, batch


def _alternatives(value: Any) -> int:
    if value is None or value == "":
        return 0
    try:
        count = int(value)
    except (TypeError, ValueError):
        raise _bad("alternatives parameter is not a number") from None
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise _bad("alternatives parameter is not a number")
    return max(0, count)


def _detected(found: detect.Detection) -> dict[str, Any]:
    # LibreTranslate's confidence is a percentage (libretranslate/detect.py: confidence * 100).
    return {"confidence": round(found.confidence * 100, 1), "language": codes.libre_code(found.language)}


async def _translate(replica: ReplicaContext, call: Call) -> Response:
    fields = await compat.read_fields(call)
    texts, batch = _texts(fields.get("q"), replica.cfg.max_batch_texts)
    call.settle(replica.admission, None, len(texts))  # more than one text: bulk unless told otherwise
    source = _language(fields.get("source"), "source", auto_ok=True)
    target = _language(fields.get("target"), "target", auto_ok=False)
    text_format = fields.get("format") or "text"
    if text_format not in LIBRE_FORMATS:
        raise ApiError(400, "unsupported_format", f"{text_format} format is not supported")
    alternatives = _alternatives(fields.get("alternatives"))
    native = {"texts": texts, "source_lang": source.code, "target_lang": target.code}
    req = compat.build_request(replica, native)
    done = await compat.translate(replica, call, req, html=text_format == "html")
    body: dict[str, Any] = {"translatedText": done.texts if batch else done.texts[0]}
    if source is AUTO:
        found = [_detected(each) for each in done.sources]
        body["detectedLanguage"] = found if batch else found[0]
    if alternatives:
        # The model gives one translation per text: the alternatives asked for are an empty list, as
        # LibreTranslate itself answers for html (its app.py: "Not supported for html yet").
        body["alternatives"] = [[] for _ in texts] if batch else []
    return JSONResponse(body, headers={"X-Request-ID": call.id, **_CORS, **done.outcome.verdicts.headers()})


async def _detect(replica: ReplicaContext, call: Call) -> Response:
    fields = await compat.read_fields(call)
    q = fields.get("q")
    texts, _ = _texts(q, replica.cfg.max_batch_texts)
    text = " ".join(texts)
    found = detect.candidates(text, replica.cfg.detect_max_chars)[:3] or [detect.detect(text)]
    call.log.update(texts=len(texts), detected=found[0].language.code)
    return JSONResponse([_detected(each) for each in found], headers=_CORS)


@router.post("/translate")
async def translate(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_translate, replica))


@router.post("/detect")
async def detect_language(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_detect, replica))


@router.get("/languages")
async def languages() -> Response:
    """Every language with every other as a target (the model translates between any two of its 38)."""
    all_codes = [codes.libre_code(lang) for lang in LANGUAGES]
    body = [
        {
            "code": code,
            "name": lang.name,
            "targets": [other for other in all_codes if other != code],
        }
        for code, lang in zip(all_codes, LANGUAGES, strict=True)
    ]
    return JSONResponse(body, headers=_CORS)


async def _translate_file(replica: ReplicaContext, call: Call) -> Response:
    """LibreTranslate's /translate_file (its app.py: multipart file, source, target, api_key; answers
    {"translatedFileUrl"}, which /download_file/<name> serves). LibreTranslate answers once the file is
    translated: so do we, from the same document job the DeepL calls make, waiting up to
    document_wait_s; a job still running then is answered all the same (the download says 409 until
    it is done: the job goes on)."""
    got = await documents.read_upload(replica, call)
    source = _language(got.fields.get("source"), "source", auto_ok=True)
    target = _language(got.fields.get("target"), "target", auto_ok=False)
    try:
        fmt = doc_jobs.check_upload(got.filename, got.data, replica.cfg.document_max_bytes)
    except doc_jobs.UploadInvalid as err:
        raise documents.refused(err, "Invalid request: ") from None
    name = got.filename or ""
    job, _ = await documents.queue_job(
        replica, call, got, fmt, (None if source is AUTO else source.code, target.code)
    )
    try:  # until done, the client leaves (the job goes on), or document_wait_s has passed
        ended = await guarded(call.request, _ended(replica, job), replica.cfg.document_wait_s)
    except ApiError as err:
        if err.status != 504:
            raise
        ended = None  # still running: answered all the same
    if ended is not None and ended.state == doc_jobs.ERROR:
        raise ApiError(500, "document_error", f"Cannot translate file: {ended.error}")
    url = f"{_public_base(replica, call)}{PREFIX}/download_file/{job.id}.{urllib.parse.quote(name)}"
    return JSONResponse({"translatedFileUrl": url}, headers=_CORS)


async def _ended(replica: ReplicaContext, job: Job) -> Job | None:
    """The job once it is done or failed (None: it is gone)."""
    while True:
        now = await documents.stored(lambda: replica.documents.get(job.owner, job.id))
        if now is None or now.state in (doc_jobs.DONE, doc_jobs.ERROR):
            return now
        await asyncio.sleep(min(replica.cfg.document_poll_s, 0.5))


def _public_base(replica: ReplicaContext, call: Call) -> str:
    """Where the caller reached us. Nginx passes Host without its port ($host): a proxied request
    gets nginx.port added back (behind another proxy, set replica.document_public_url)."""
    if replica.cfg.document_public_url:
        return replica.cfg.document_public_url.rstrip("/")
    request = call.request
    host = request.headers.get("host", f"{replica.cfg.host}:{replica.cfg.port}")
    proxied = "x-forwarded-for" in request.headers
    if proxied and ":" not in host.rsplit("]", 1)[-1]:
        host = f"{host}:{replica.front_port}"
    return f"{request.url.scheme}://{host}"


async def _download(replica: ReplicaContext, name: str, call: Call) -> Response:
    """The translated file of /translate_file, to the key that made it (another key: not found)."""
    job_id = name.split(".", 1)[0]
    job = await documents.find_job(replica, call, job_id, check_key=False)
    if job.state == doc_jobs.ERROR:
        raise ApiError(500, "document_error", f"Cannot translate file: {job.error}")
    if job.state != doc_jobs.DONE:
        # Not a 503: Nginx would take that for a failing replica (max_fails) and try the next one.
        retry = {"Retry-After": str(max(1, round(replica.cfg.document_poll_s)))}
        raise ApiError(409, "document_not_ready", "The file is not translated yet: retry later.", retry)
    got = await documents.stored(lambda: replica.documents.result(job.owner, job.id, False))
    if got is None:
        raise ApiError(404, "document_not_found", "Invalid filename")
    response = documents.file_response(*got)
    response.headers.update(_CORS)
    return response


@router.post("/translate_file")
async def translate_file(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_translate_file, replica))


@router.get("/download_file/{name}")
async def download_file(name: str, request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_download, replica, name))


# What the app mounts and what the OpenAPI document says of each operation (edge/dialects.py names us).
ROUTERS = (router,)
OPERATIONS: Operations = {
    ("post", "/libretranslate/translate"): Op(cs.libre_translate_body, COMPAT_MEDIA, COMPAT, checked=True),
    ("post", "/libretranslate/detect"): Op(cs.libre_detect_body, COMPAT_MEDIA, (*GATE, *BODY)),
    ("get", "/libretranslate/languages"): Op(gated=False),
    ("post", "/libretranslate/translate_file"): Op(
        cs.libre_file_body, (MULTIPART,), (*DOCUMENT_CALL, *WORK, (413, "document_too_large"))
    ),
    ("get", "/libretranslate/download_file/{name}"): Op(
        errors=(*DOCUMENT_CALL, (409, "document_not_ready"), (500, "document_error")), success={200: ("*/*",)}
    ),
}

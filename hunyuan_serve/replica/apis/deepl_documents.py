"""DeepL's document calls as jobs: upload (POST /v2/document), status, one download; each its key's alone.

Shapes from developers.deepl.com api-reference/document and the deepl client (translator.py:
translate_document_upload sends multipart file + target_lang/source_lang/formality/glossary_id and
reads document_id/document_key; translate_document_get_status POSTs {"document_key"} to
v2/document/{id} and reads status/seconds_remaining/billed_characters/error_message;
translate_document_download POSTs the same to .../result, a 503 there is DocumentNotReadyException).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import mimetypes
import time
import urllib.parse
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from fastapi import Response
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from hunyuan_serve.families.base import GLOSSARY
from hunyuan_serve.families.build import FAMILY_FEATURES
from hunyuan_serve.languages import Language, UnknownLanguage
from hunyuan_serve.localization.formats import FormatError
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.apis import codes, compat
from hunyuan_serve.replica.apis import deepl_glossaries as glossaries
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.documents import jobs as documents
from hunyuan_serve.replica.documents.files import read
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.glossaries import dictionary_for
from hunyuan_serve.replica.http import read_body
from hunyuan_serve.storage.backend import StoreUnavailable
from hunyuan_serve.storage.jobs import Job

NOT_FOUND = "Document not found"
# A document over document_max_bytes: a 413 in every API's shape (LibreTranslate's other refusals are 400).
TOO_LARGE = "document_too_large"
# Room for the form's other fields and part headers around the file itself.
FORM_OVERHEAD_BYTES = 64 * 1024
_FORMALITY_OK = ("default", "prefer_less", "prefer_more")
# Sent with no effect: the model has one quality and keeps the input's format (DeepL's names).
_NO_EFFECT = {"auth_key", "enable_document_minification", "enable_beta_languages"}


@dataclass(frozen=True)
class Upload:
    """A multipart upload read whole: the file's name and bytes, and the text fields."""

    filename: str | None
    data: bytes
    fields: dict[str, str]


def _bad(message: str) -> ApiError:
    return ApiError(400, "invalid_request", message)


async def stored(work: Any) -> Any:
    """A document store call in a thread (SQLite may wait for another replica's lock); its failure a 503."""
    try:
        return await asyncio.to_thread(work)
    except StoreUnavailable as err:
        raise ApiError(503, "store_unavailable", f"document store unavailable: {err}") from None


async def read_upload(replica: ReplicaContext, call: Call) -> Upload:
    """The body (a 413 past document_max_bytes and the form around it) as one file part and fields."""
    limit = replica.cfg.document_max_bytes
    try:
        raw = await read_body(call.request, limit + FORM_OVERHEAD_BYTES)
    except ApiError as err:
        message = f"The document is over the limit of {limit} bytes."
        raise ApiError(err.status, TOO_LARGE, message) if err.status == 413 else err from None
    kind = call.request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "multipart/form-data":
        raise _bad("Send the document as multipart/form-data with a 'file' part.")

    async def once() -> AsyncGenerator[bytes, None]:
        yield raw

    try:
        form = await MultiPartParser(call.request.headers, once(), max_files=1).parse()
    except MultiPartException as err:
        raise _bad(f"The multipart body is malformed: {err.message}") from None
    files = [(name, value) for name, value in form.multi_items() if isinstance(value, UploadFile)]
    fields = {name: value for name, value in form.multi_items() if isinstance(value, str)}
    if not files or files[0][0] != "file":
        raise _bad("Parameter 'file' not specified (a multipart file part named 'file').")
    upload = files[0][1]
    data = await upload.read()
    await form.close()
    return Upload(upload.filename, data, fields)


def refused(err: documents.UploadInvalid, prefix: str = "") -> ApiError:
    return ApiError(err.status, TOO_LARGE if err.status == 413 else "invalid_document", prefix + err.message)


def _checked(replica: ReplicaContext, upload: Upload) -> tuple[str, str]:
    """The file name (DeepL's `filename` field stands in for the part's) and its format, or the 4xx."""
    name = upload.fields.get("filename") or upload.filename
    try:
        fmt = documents.check_upload(name, upload.data, replica.cfg.document_max_bytes)
    except documents.UploadInvalid as err:
        raise refused(err) from None
    assert name is not None  # check_upload refuses a file without a name
    return name, fmt


def _options(fields: dict[str, str]) -> None:
    formality = fields.get("formality") or "default"
    if formality not in _FORMALITY_OK:
        raise _bad(
            "Value for 'formality' not supported: the model has no formality control "
            f"(send one of {', '.join(_FORMALITY_OK)})."
        )
    output = fields.get("output_format")
    if output:
        raise _bad("Parameter 'output_format' not supported: the result is in the input's format.")
    for name in ("glossary_ids", "style_id", "translation_memory_id"):
        if fields.get(name):
            raise _bad(f"Parameter '{name}' not supported for documents.")


async def _terms(replica: ReplicaContext, call: Call, fields: dict[str, str], pair: tuple[str, str]) -> Any:
    glossary_id = fields.get("glossary_id")
    if not glossary_id:
        return None
    family = replica.translator.family
    if GLOSSARY not in FAMILY_FEATURES[family]:
        raise _bad(
            f"Parameter 'glossary_id' not supported: this server's prompt family {family} has no "
            "terminology prompt to feed a glossary into."
        )
    found = await glossaries.find(replica, call, glossary_id)
    dictionary = dictionary_for(found, *pair)
    if dictionary is None:
        raise _bad(f"The glossary has no dictionary for {pair[0]}->{pair[1]}.")
    return dict(dictionary.entries)


async def upload(replica: ReplicaContext, call: Call) -> Response:
    """A new job, queued for the replicas' workers; the answer is DeepL's {document_id, document_key}."""
    got = await read_upload(replica, call)
    target = _language(got.fields.get("target_lang"), "target_lang")
    source_code = got.fields.get("source_lang")
    source = _language(source_code, "source_lang") if source_code else None
    _options(got.fields)
    name, fmt = _checked(replica, got)
    terms = None
    if got.fields.get("glossary_id"):
        if source is None:
            raise _bad("Parameter 'source_lang' is required when using a glossary.")
        terms = await _terms(replica, call, got.fields, (_base(source), _base(target)))
    source_lang = source.code if source else None
    job, document_key = await queue_job(
        replica, call, Upload(name, got.data, {}), fmt, (source_lang, target.code), terms
    )
    return JSONResponse({"document_id": job.id, "document_key": document_key})


async def queue_job(
    replica: ReplicaContext,
    call: Call,
    upload: Upload,
    fmt: str,
    pair: tuple[str | None, str],
    terms: dict[str, str] | None = None,
) -> tuple[Job, str]:
    """The upload read now (a file its format cannot read is a 400, and the key's quota is checked
    against its characters: DeepL's 456, LibreTranslate's 403), then stored as one queued job owned
    by the caller's key; with the document_key that reads it (kept only hashed)."""
    name = upload.filename or ""
    try:
        parsed = await asyncio.to_thread(read, upload.data, name, fmt, pair[1], pair[0])
    except (FormatError, ValueError) as err:
        raise ApiError(400, "invalid_document", f"The file cannot be read as {fmt}: {err}") from None
    await replica.usage.check(call.owner, sum(len(segment) for segment in parsed.segments))
    job_id, document_key = documents.new_ids()
    now = time.time()
    options = json.dumps({"terms": terms}, ensure_ascii=False) if terms else None
    key = documents.key_hash(document_key)
    owner = glossaries.owner(call)
    segments = len(parsed.segments)
    job = Job(job_id, owner, key, documents.QUEUED, name, fmt, pair[0], pair[1], now, now, segments)
    job = dataclasses.replace(job, options=options)
    await stored(lambda: replica.documents.add(job, upload.data))
    call.log.update(document_id=job.id, document_bytes=len(upload.data), document_format=fmt)
    return job, document_key


def _language(value: Any, name: str) -> Language:
    if not isinstance(value, str) or not value.strip():
        raise _bad(f"Parameter '{name}' not specified.")
    try:
        return codes.deepl_language(value)
    except UnknownLanguage:
        raise ApiError(400, "unsupported_language", f"Value for '{name}' not supported.") from None


def _base(lang: Language) -> str:
    return codes.deepl_source_code(lang).lower()


async def find_job(replica: ReplicaContext, call: Call, document_id: str, check_key: bool = True) -> Job:
    """The caller's job whose document_key the body names; another key's job, or a wrong document_key,
    is DeepL's 404 (nothing tells that it exists)."""
    key = None
    if check_key:
        fields = await compat.read_fields(call)
        key = compat.query_or_form(call, fields, "document_key")
        if not isinstance(key, str) or not key:
            raise _bad("Parameter 'document_key' not specified.")
    job = await stored(lambda: replica.documents.get(glossaries.owner(call), document_id))
    if job is None or (check_key and not documents.job_key_matches(job, key)):
        raise ApiError(404, "document_not_found", NOT_FOUND)
    return job


async def status(replica: ReplicaContext, document_id: str, call: Call) -> Response:
    job = await find_job(replica, call, document_id)
    return JSONResponse(documents.status_body(job, time.time()))


async def result(replica: ReplicaContext, document_id: str, call: Call) -> Response:
    """The translated file, once: it is deleted as it is read (DeepL: "removed from the server once it
    was downloaded"). Not done yet: DeepL's 503 (the client's DocumentNotReadyException)."""
    job = await find_job(replica, call, document_id)
    not_ready(job, replica)
    got = await stored(lambda: replica.documents.result(job.owner, job.id, True))
    if got is None:  # downloaded by a racing call in between
        raise ApiError(404, "document_not_found", NOT_FOUND)
    return file_response(*got)


def not_ready(job: Job, replica: ReplicaContext) -> None:
    if job.state == documents.ERROR:
        raise ApiError(400, "document_error", f"The document failed: {job.error or 'unknown error'}")
    if job.state != documents.DONE:
        retry = {"Retry-After": str(max(1, round(replica.cfg.document_poll_s)))}
        raise ApiError(503, "document_not_ready", "Document not ready: translation is in progress.", retry)


def file_response(filename: str, data: bytes) -> Response:
    kind = mimetypes.guess_type(filename)[0] or "application/octet-stream"
    quoted = urllib.parse.quote(filename)
    disposition = f"attachment; filename*=UTF-8''{quoted}"
    return Response(data, media_type=kind, headers={"Content-Disposition": disposition})

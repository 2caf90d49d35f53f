"""DeepL's API at the root: /v2/translate, languages, usage, glossaries (and v3's), documents."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from hunyuan_serve.families.base import CONTEXT, GLOSSARY, STYLE
from hunyuan_serve.languages import AUTO, Language, UnknownLanguage
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.apis import codes, compat, deepl_languages
from hunyuan_serve.replica.apis import compat_schemas as cs
from hunyuan_serve.replica.apis import deepl_documents as documents
from hunyuan_serve.replica.apis import deepl_glossaries as glossaries
from hunyuan_serve.replica.apis.compat_fields import DEEPL_FORMALITY, DEEPL_NO_EFFECT, DEEPL_TAG_HANDLING
from hunyuan_serve.replica.context import ReplicaContext, current
from hunyuan_serve.replica.errors import ApiError, FeatureRefused
from hunyuan_serve.replica.openapi.operations import (
    BODY,
    COMPAT,
    COMPAT_MEDIA,
    DOCUMENT_CALL,
    GATE,
    GLOSSARY_CALL,
    JSON,
    MULTIPART,
    STORE,
    Op,
    Operations,
    Schema,
)
from hunyuan_serve.storage.backend import StoreUnavailable

router = APIRouter(prefix="/v2")
v3 = APIRouter(prefix="/v3")  # the multilingual glossary calls deepl.DeepLClient makes
ReplicaDep = Annotated[ReplicaContext, Depends(current)]
# A key without a limit (or a replica without keys): /v2/usage shows what DeepL shows a Pro account
# without a cost limit.
UNLIMITED_CHARACTERS = 1_000_000_000_000
_HONOURED = {"text", "source_lang", "target_lang", "context", "tag_handling", "ignore_tags", "formality"}
_HONOURED |= {"custom_instructions", "glossary_id"}
# What the model cannot do, named in the 400 (DeepL's own wording: "... not supported ...").
_UNSUPPORTED = {
    "glossary_ids": "send one glossary as glossary_id (the terminology prompt takes one list of terms)",
    "style_id": "this server keeps no style rules",
    "style_rule_id": "this server keeps no style rules",
    "translation_memory_id": "this server keeps no translation memories",
    "translation_memory_threshold": "this server keeps no translation memories",
}
# The core's features (hunyuan_serve.families.base) by the DeepL parameter that asks for each.
_FEATURE_PARAMETERS = {GLOSSARY: "glossary_id", CONTEXT: "context", STYLE: "custom_instructions"}


def _bad(message: str) -> ApiError:
    return ApiError(400, "invalid_request", message)


def _check_names(fields: dict[str, Any]) -> None:
    for name in fields:
        if name in _UNSUPPORTED:
            raise _bad(f"Parameter '{name}' not supported: {_UNSUPPORTED[name]}.")
    unknown = sorted(set(fields) - _HONOURED - DEEPL_NO_EFFECT)
    if unknown:
        raise _bad(f"Parameter(s) not supported by this server: {', '.join(unknown)[:200]}.")


def _texts(value: Any, limit: int) -> list[str]:
    if value is None:
        raise _bad("Parameter 'text' not specified.")
    items = value if isinstance(value, list) else [value]
    if not items:
        raise _bad("Parameter 'text' not specified.")
    if len(items) > limit:
        raise ApiError(
            413, "too_many_texts", f"Too many texts: {len(items)} in one request; the limit is {limit}."
        )
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise _bad(f"Parameter 'text' must be a string or a list of strings (text[{index}]).")
        if not item.strip():
            raise _bad(f"Parameter 'text' holds an empty text (text[{index}]).")
    return items


def _language(value: Any, name: str) -> Language:
    if not isinstance(value, str) or not value.strip():
        raise _bad(f"Value for '{name}' not supported.")
    try:
        return codes.deepl_language(value)
    except UnknownLanguage:
        raise ApiError(400, "unsupported_language", f"Value for '{name}' not supported.") from None


def _tags(fields: dict[str, Any]) -> tuple[bool, list[str]]:
    handling = fields.get("tag_handling")
    if handling is not None and handling not in DEEPL_TAG_HANDLING:
        raise _bad("Value for 'tag_handling' not supported.")
    raw = fields.get("ignore_tags") or []
    items = raw if isinstance(raw, list) else [raw]
    if not all(isinstance(item, str) for item in items):
        raise _bad("Value for 'ignore_tags' not supported.")
    return handling is not None, [tag.strip() for item in items for tag in item.split(",") if tag.strip()]


def _instructions(fields: dict[str, Any]) -> dict[str, Any]:
    """formality (only its defaults), context and custom_instructions (the family's style) as ours."""
    formality = fields.get("formality", "default")
    if formality not in DEEPL_FORMALITY:
        raise _bad(
            "Value for 'formality' not supported: the model has no formality control "
            f"(send one of {', '.join(DEEPL_FORMALITY)})."
        )
    native: dict[str, Any] = {}
    if fields.get("context") is not None:
        native["context"] = fields["context"]
    custom = fields.get("custom_instructions")
    if custom is not None:
        items = custom if isinstance(custom, list) else [custom]
        if not all(isinstance(item, str) for item in items):
            raise _bad("Parameter 'custom_instructions' must be a list of strings.")
        native["style"] = "\n".join(items)
    return native


async def _translate(replica: ReplicaContext, call: Call) -> Response:
    fields = await compat.read_fields(call)
    _check_names(fields)
    texts = _texts(fields.get("text"), replica.cfg.max_batch_texts)
    call.settle(replica.admission, None, len(texts))  # more than one text: bulk unless told otherwise
    target = _language(fields.get("target_lang"), "target_lang")
    source = fields.get("source_lang")
    source_lang = AUTO if source is None or source == "" else _language(source, "source_lang")
    html, ignore = _tags(fields)
    native: dict[str, Any] = {"texts": texts, "source_lang": source_lang.code, "target_lang": target.code}
    if fields.get("glossary_id") is not None:
        if source_lang is AUTO:
            raise _bad("Parameter 'source_lang' is required when using a glossary.")
        pair = (_base(source_lang), _base(target))
        terms = await glossaries.request_terms(replica, call, fields["glossary_id"], pair, texts)
        native.update({"glossary": terms} if terms else {})
    req = compat.build_request(replica, {**native, **_instructions(fields)})
    try:
        done = await compat.translate(replica, call, req, html=html, ignore_tags=ignore, by_script=True)
    except FeatureRefused as err:  # named as the caller sent it, not as the core calls it
        raise err.named(_FEATURE_PARAMETERS) from None
    translations = [
        {
            "detected_source_language": codes.deepl_source_code(found.language),
            "text": text,
            "billed_characters": len(original),
        }
        for text, found, original in zip(done.texts, done.sources, texts, strict=True)
    ]
    headers = {"X-Request-ID": call.id, **done.outcome.verdicts.headers()}
    return JSONResponse({"translations": translations}, headers=headers)


def _base(lang: Language) -> str:
    """A language as a glossary names it: DeepL's base code, lowercase (EN-GB and EN-US are en)."""
    return codes.deepl_source_code(lang).lower()


async def _usage(replica: ReplicaContext, call: Call) -> Response:
    """The calling key's characters so far (every replica's, from the store) and its limit."""
    if call.owner is None:  # no keys file: nobody to count for
        return JSONResponse({"character_count": 0, "character_limit": UNLIMITED_CHARACTERS})
    try:
        used = await replica.usage.used(call.owner)
    except StoreUnavailable as err:
        raise ApiError(503, "store_unavailable", f"usage store unavailable: {err}") from None
    limit = replica.usage.limit(call.owner)
    body = {"character_count": used, "character_limit": UNLIMITED_CHARACTERS if limit is None else limit}
    return JSONResponse(body)


async def _languages(call: Call) -> Response:
    fields = await compat.read_fields(call)  # the deepl client sends type=target as a GET body
    kind = compat.query_or_form(call, fields, "type")
    kind = "source" if kind is None else kind  # absent is source, as DeepL's; given empty is refused
    if kind not in ("source", "target"):
        raise _bad("Value for 'type' not supported.")
    return JSONResponse(codes.deepl_languages(kind))


@router.post("/translate")
async def translate(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_translate, replica))


@router.api_route("/languages", methods=["GET", "POST"])
async def languages(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _languages)


async def _v3_languages(replica: ReplicaContext, call: Call) -> Response:
    resource = deepl_languages.known_resource(call.request.query_params.get("resource"))
    if resource is None:
        have = ", ".join((*deepl_languages.RESOURCES, *deepl_languages.ABSENT))
        raise _bad(f"Value for 'resource' not supported: send one of {have}.")
    return JSONResponse(deepl_languages.languages_of(resource, replica.translator.family))


@v3.get("/languages")
async def v3_languages(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _route(_v3_languages, replica))


@router.api_route("/usage", methods=["GET", "POST"])
async def usage(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_usage, replica))


def _route(work: Callable[..., Awaitable[Response]], *args: Any) -> Callable[[Call], Awaitable[Response]]:
    return functools.partial(work, *args)


@router.post("/glossaries")
async def create_glossary(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _route(glossaries.create_v2, replica))


@router.get("/glossaries")
async def list_glossaries(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _route(glossaries.list_owned, replica, False))


@router.get("/glossaries/{glossary_id}")
async def get_glossary(glossary_id: str, request: Request, replica: ReplicaDep) -> Response:
    work = _route(glossaries.get, replica, glossary_id, False)
    return await replica.gate.serve(request, work)


@router.get("/glossaries/{glossary_id}/entries")
async def glossary_entries(glossary_id: str, request: Request, replica: ReplicaDep) -> Response:
    work = _route(glossaries.entries_v2, replica, glossary_id)
    return await replica.gate.serve(request, work)


@router.delete("/glossaries/{glossary_id}")
async def delete_glossary(glossary_id: str, request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _route(glossaries.delete, replica, glossary_id))


@router.get("/glossary-language-pairs")
async def glossary_language_pairs() -> Response:
    return JSONResponse(glossaries.language_pairs_body())


@v3.post("/glossaries")
async def create_multilingual(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _route(glossaries.create_v3, replica))


@v3.get("/glossaries")
async def list_multilingual(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _route(glossaries.list_owned, replica, True))


@v3.get("/glossaries/{glossary_id}")
async def get_multilingual(glossary_id: str, request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _route(glossaries.get, replica, glossary_id, True))


@v3.get("/glossaries/{glossary_id}/entries")
async def multilingual_entries(glossary_id: str, request: Request, replica: ReplicaDep) -> Response:
    work = _route(glossaries.entries_v3, replica, glossary_id)
    return await replica.gate.serve(request, work)


@v3.delete("/glossaries/{glossary_id}")
async def delete_multilingual(glossary_id: str, request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _route(glossaries.delete, replica, glossary_id))


@router.post("/document")
async def upload_document(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _route(documents.upload, replica))


@router.post("/document/{document_id}")
async def document_status(document_id: str, request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _route(documents.status, replica, document_id))


@router.post("/document/{document_id}/result")
async def document_result(document_id: str, request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, _route(documents.result, replica, document_id))


_RESOURCE = {
    "name": "resource",
    "in": "query",
    "required": True,
    "schema": {"type": "string", "enum": [*deepl_languages.RESOURCES, *deepl_languages.ABSENT]},
}
_LANGS = {"name": "type", "in": "query", "schema": {"type": "string", "enum": ["source", "target"]}}


def _query(name: str) -> Schema:
    """A glossary's language named in the query (v3's entries: the dictionary to read)."""
    schema = cs.deepl_glossary_fields()[name]
    return {"name": name, "in": "query", "required": True, "schema": schema}


# What the app mounts and what the OpenAPI document says of each operation (edge/dialects.py names us).
ROUTERS = (router, v3)
OPERATIONS: Operations = {
    ("post", "/v2/translate"): Op(
        cs.deepl_translate_body, COMPAT_MEDIA, (*COMPAT, *GLOSSARY_CALL), checked=True
    ),
    ("get", "/v2/languages"): Op(errors=((400, "invalid_request"), *GATE), params=(_LANGS,)),
    ("post", "/v2/languages"): Op(errors=((400, "invalid_request"), *GATE), params=(_LANGS,)),
    ("get", "/v3/languages"): Op(errors=((400, "invalid_request"), *GATE), params=(_RESOURCE,)),
    ("get", "/v2/usage"): Op(errors=(*GATE, *STORE)),
    ("post", "/v2/usage"): Op(errors=(*GATE, *STORE)),
    ("get", "/v2/glossaries"): Op(errors=GLOSSARY_CALL),
    ("post", "/v2/glossaries"): Op(
        cs.deepl_glossary_body,
        COMPAT_MEDIA,
        (*GLOSSARY_CALL, *BODY),
        success={201: (JSON,)},
        creates="glossary_id",
    ),
    ("get", "/v2/glossaries/{glossary_id}"): Op(errors=GLOSSARY_CALL),
    ("delete", "/v2/glossaries/{glossary_id}"): Op(errors=GLOSSARY_CALL, success={204: ()}),
    ("get", "/v2/glossaries/{glossary_id}/entries"): Op(
        errors=GLOSSARY_CALL, success={200: ("text/tab-separated-values",)}
    ),
    ("get", "/v2/glossary-language-pairs"): Op(gated=False),
    ("post", "/v2/document"): Op(
        cs.deepl_document_body, (MULTIPART,), (*DOCUMENT_CALL, (413, "document_too_large"))
    ),
    ("post", "/v2/document/{document_id}"): Op(cs.deepl_document_key_body, COMPAT_MEDIA, DOCUMENT_CALL),
    ("post", "/v2/document/{document_id}/result"): Op(
        cs.deepl_document_key_body,
        COMPAT_MEDIA,
        (*DOCUMENT_CALL, (503, "document_not_ready")),
        success={200: ("*/*",)},
    ),
    ("get", "/v3/glossaries"): Op(errors=GLOSSARY_CALL),
    ("post", "/v3/glossaries"): Op(
        cs.deepl_multilingual_body,
        (JSON,),
        (*GLOSSARY_CALL, *BODY),
        success={201: (JSON,)},
        creates="glossary_id",
    ),
    ("get", "/v3/glossaries/{glossary_id}"): Op(errors=GLOSSARY_CALL),
    ("delete", "/v3/glossaries/{glossary_id}"): Op(errors=GLOSSARY_CALL, success={204: ()}),
    ("get", "/v3/glossaries/{glossary_id}/entries"): Op(
        errors=GLOSSARY_CALL, params=(_query("source_lang"), _query("target_lang"))
    ),
}

"""DeepL's glossary calls, v2 (one language pair) and v3 (dictionaries), each glossary its key's alone."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from fastapi import Response
from fastapi.responses import JSONResponse

from hunyuan_serve.families.base import GLOSSARY
from hunyuan_serve.families.build import FAMILY_FEATURES, families_with
from hunyuan_serve.families.glossary import terms_in_text
from hunyuan_serve.replica import glossaries as g
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.apis import compat
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.storage.backend import StoreUnavailable
from hunyuan_serve.storage.glossary import Dictionary, Glossary

NOT_FOUND = "Glossary not found"
# v3 takes the same entries a dictionary; a glossary of more than this many pairs is refused whole.
MAX_DICTIONARIES = 64


def owner(call: Call) -> str:
    """Who owns what this call makes: its key's id ("" on a replica without keys: one open owner)."""
    return call.owner or ""


def _bad(message: str) -> ApiError:
    return ApiError(400, "invalid_request", message)


async def _stored(work: Awaitable[Any]) -> Any:
    """A store call, its failure a 503 (Nginx tries another replica; the client retries 503 itself)."""
    try:
        return await work
    except StoreUnavailable as err:
        raise ApiError(503, "store_unavailable", f"glossary store unavailable: {err}") from None


async def find(replica: ReplicaContext, call: Call, glossary_id: Any) -> Glossary:
    """The caller's glossary, else DeepL's 404 (another key's glossary is not found, as at DeepL)."""
    if not isinstance(glossary_id, str) or not glossary_id.strip():
        raise _bad("Parameter 'glossary_id' not specified.")
    found = await _stored(replica.store.glossary(owner(call), glossary_id))
    if found is None:
        raise ApiError(404, "glossary_not_found", NOT_FOUND)
    return found


def _dictionary(replica: ReplicaContext, fields: dict[str, Any]) -> Dictionary:
    cfg = replica.cfg
    source = g.glossary_language(fields.get("source_lang"), "source_lang")
    target = g.glossary_language(fields.get("target_lang"), "target_lang")
    if source == target:
        # Not a pair /v2/glossary-language-pairs lists, and no request translates a language into itself.
        raise g.EntriesInvalid(
            f"Unsupported glossary language pair: source_lang and target_lang are both '{source}'."
        )
    entries = g.parse_entries(
        fields.get("entries"),
        fields.get("entries_format"),
        (source, target),
        cfg.max_glossary_entries,
        cfg.max_glossary_bytes,
        cfg.max_glossary_term_chars,
    )
    return Dictionary(source, target, entries)


async def create_v2(replica: ReplicaContext, call: Call) -> Response:
    fields = await compat.read_fields(call)
    try:
        name = g.check_name(fields.get("name"))
        glossary = g.new_glossary(owner(call), name, [_dictionary(replica, fields)])
    except g.EntriesInvalid as err:
        raise _bad(str(err)) from None
    await _stored(replica.store.create_glossary(glossary))
    call.log.update(glossary_entries=len(glossary.dictionaries[0].entries))
    return JSONResponse(g.v2_info(glossary), status_code=201)


async def create_v3(replica: ReplicaContext, call: Call) -> Response:
    fields = await compat.read_fields(call)
    given = fields.get("dictionaries")
    try:
        name = g.check_name(fields.get("name"))
        if not isinstance(given, list) or not given or not all(isinstance(d, dict) for d in given):
            raise g.EntriesInvalid("Parameter 'dictionaries' must be a non-empty list of dictionaries.")
        if len(given) > MAX_DICTIONARIES:
            raise g.EntriesInvalid(f"Too many dictionaries: {len(given)}; the limit is {MAX_DICTIONARIES}.")
        dictionaries = [_dictionary(replica, each) for each in given]
    except g.EntriesInvalid as err:
        raise _bad(str(err)) from None
    pairs = [(d.source, d.target) for d in dictionaries]
    if len(set(pairs)) != len(pairs):
        raise _bad("Parameter 'dictionaries' holds one language pair twice.")
    glossary = g.new_glossary(owner(call), name, dictionaries)
    await _stored(replica.store.create_glossary(glossary))
    return JSONResponse(g.v3_info(glossary), status_code=201)


async def list_owned(replica: ReplicaContext, v3_shape: bool, call: Call) -> Response:
    found = await _stored(replica.store.glossaries(owner(call)))
    if v3_shape:
        return JSONResponse({"glossaries": [g.v3_info(each) for each in found]})
    # v2 speaks of one language pair a glossary: a v3 glossary of several pairs is v3's to show.
    return JSONResponse({"glossaries": [g.v2_info(each) for each in found if len(each.dictionaries) == 1]})


async def get(replica: ReplicaContext, glossary_id: str, v3_shape: bool, call: Call) -> Response:
    found = await find(replica, call, glossary_id)
    if v3_shape:
        return JSONResponse(g.v3_info(found))
    if len(found.dictionaries) != 1:
        raise _bad("This glossary has several dictionaries: read it with the v3 glossary endpoints.")
    return JSONResponse(g.v2_info(found))


async def entries_v2(replica: ReplicaContext, glossary_id: str, call: Call) -> Response:
    found = await find(replica, call, glossary_id)
    if len(found.dictionaries) != 1:
        raise _bad("This glossary has several dictionaries: read them with GET /v3/glossaries/{id}/entries.")
    tsv = g.as_tsv(found.dictionaries[0].entries)
    return Response(tsv, media_type="text/tab-separated-values; charset=utf-8")


async def entries_v3(replica: ReplicaContext, glossary_id: str, call: Call) -> Response:
    found = await find(replica, call, glossary_id)
    query = call.request.query_params
    try:
        source = g.glossary_language(query.get("source_lang"), "source_lang")
        target = g.glossary_language(query.get("target_lang"), "target_lang")
    except g.EntriesInvalid as err:
        raise _bad(str(err)) from None
    dictionary = g.dictionary_for(found, source, target)
    if dictionary is None:
        raise ApiError(404, "glossary_not_found", f"Glossary has no dictionary for {source}->{target}.")
    entries = {"source_lang": source, "target_lang": target, "entries": g.as_tsv(dictionary.entries)}
    return JSONResponse({"dictionaries": [{**entries, "entries_format": "tsv"}]})


async def delete(replica: ReplicaContext, glossary_id: str, call: Call) -> Response:
    if not await _stored(replica.store.delete_glossary(owner(call), glossary_id)):
        raise ApiError(404, "glossary_not_found", NOT_FOUND)
    return Response(status_code=204)


def language_pairs_body() -> dict[str, Any]:
    return {"supported_languages": g.language_pairs()}


async def request_terms(
    replica: ReplicaContext, call: Call, glossary_id: Any, pair: tuple[str, str], texts: list[str]
) -> list[dict[str, str]]:
    """/v2/translate's glossary_id: the terms of the caller's glossary found in the texts, as the native
    `glossary` field (each text's prompt then gets only those it holds: Translator._features)."""
    family = replica.translator.family
    if GLOSSARY not in FAMILY_FEATURES[family]:
        have = ", ".join(families_with(GLOSSARY)) or "none"
        raise _bad(
            f"Parameter 'glossary_id' not supported: this server's prompt family {family} has no "
            f"terminology prompt to feed a glossary into (families that have one: {have})."
        )
    found = await find(replica, call, glossary_id)
    dictionary = g.dictionary_for(found, *pair)
    if dictionary is None:
        have = ", ".join(f"{d.source}->{d.target}" for d in found.dictionaries)
        raise _bad(
            f"The glossary's languages ({have}) do not match this request's source and target "
            f"({pair[0]}->{pair[1]})."
        )
    plain = [compat.plain_text(text) for text in texts]
    terms = {term: None for text in plain for term in terms_in_text(dictionary.entries, text)}
    call.log.update(glossary_id=found.id, glossary_terms=len(terms))
    return [{"source": source, "target": target} for source, target in terms]

"""tmserver's lookup API over the memories, so Weblate adds them as a machinery backend.

Weblate's TMServerTranslation (weblate/machinery/tmserver.py) asks `GET {url}/languages/` for
{sourceLanguages, targetLanguages} (every pair of the two lists is taken as supported) and
`GET {url}/{source}/{target}/unit/{text}` for [{source, target, quality}], quality 0-100, keeping
those at or above its threshold. Its codes are Weblate's, lowercased with "_" (zh_hans, pt_br).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from hunyuan_serve.memory.tmx import language_code
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.apis.memories import memory_call
from hunyuan_serve.replica.context import ReplicaContext, current
from hunyuan_serve.replica.memories.recall import owners_of
from hunyuan_serve.replica.openapi.operations import GATE, STORE, Op, Operations

PREFIX = "/tmserver"
router = APIRouter(prefix=PREFIX)
ReplicaDep = Annotated[ReplicaContext, Depends(current)]
# Weblate names Chinese by script; the memory keeps the service's codes (zh, zh-Hant).
ALIASES = {"zh": ("zh_hans", "zh_cn"), "zh-Hant": ("zh_hant", "zh_tw")}


def weblate_codes(code: str) -> list[str]:
    """The codes Weblate may ask a language by: ours as tmserver spells codes, and the aliases."""
    return [code.replace("-", "_").lower(), *ALIASES.get(code, ())]


async def _languages(replica: ReplicaContext, call: Call) -> Response:
    pairs = await memory_call(replica.recall.store.pairs(owners_of(call.owner)))
    sources = sorted({c for src, _ in pairs for c in weblate_codes(src)})
    targets = sorted({c for _, tgt in pairs for c in weblate_codes(tgt)})
    return JSONResponse({"sourceLanguages": sources, "targetLanguages": targets})


async def _unit(replica: ReplicaContext, src: str, tgt: str, text: str, call: Call) -> Response:
    recall, pair = replica.recall, (language_code(src), language_code(tgt))
    indexes = await memory_call(recall.indexes(owners_of(call.owner), pair))
    found: list[dict[str, Any]] = []
    if indexes:
        hits = recall.exact(indexes, [text])
        if text in hits:
            found.append({"source": text, "target": hits[text], "quality": 100})
        [matches] = await recall.fuzzy(indexes, [text])
        found += [
            {"source": m.source, "target": m.target, "quality": int(m.score)}
            for m in matches
            if m.source != text
        ]
    call.log.update(memory_matches=len(found))
    return JSONResponse(found)


@router.get("/languages/")
async def languages(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, lambda call: _languages(replica, call))


@router.get("/{src}/{tgt}/unit/{text:path}")
async def unit(src: str, tgt: str, text: str, request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, lambda call: _unit(replica, src, tgt, text, call))


# What the app mounts and what the OpenAPI document says of each operation (edge/dialects.py names us).
ROUTERS = (router,)
OPERATIONS: Operations = {
    ("get", "/tmserver/languages/"): Op(errors=(*GATE, *STORE)),
    ("get", "/tmserver/{src}/{tgt}/unit/{text}"): Op(errors=(*GATE, *STORE)),
}

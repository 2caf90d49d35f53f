"""Our own API: POST /translate (one text or a batch), POST /fuse (a Chimera replica) and GET /languages."""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from hunyuan_serve.families import CHIMERA, chimera
from hunyuan_serve.languages import AUTO, LANGUAGES
from hunyuan_serve.replica import ensemble
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.apis import compat, sse
from hunyuan_serve.replica.apis import request_schemas as rs
from hunyuan_serve.replica.context import ReplicaContext, current
from hunyuan_serve.replica.engine.interface import Delta
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.memories import use as memory_use
from hunyuan_serve.replica.openapi.operations import JSON, SSE, TRANSLATE, Op, Operations
from hunyuan_serve.replica.outcome import Outcome, StreamStart
from hunyuan_serve.replica.schema import TranslateRequest, parse_fuse, parse_translate

router = APIRouter()
ReplicaDep = Annotated[ReplicaContext, Depends(current)]


def _answer(replica: ReplicaContext, req: TranslateRequest, outcome: Outcome, call: Call) -> dict[str, Any]:
    body: dict[str, Any] = {"source_lang": req.source.code, "target_lang": req.target.code}
    if req.batch:
        body.update(results=outcome.results, cached=outcome.cached)
    else:
        body.update(result=outcome.results[0], cached=outcome.cached[0])
    if req.preserve_format:
        # The markup each text lost on the way (opening + closing tag); its text is returned without it.
        lost = [list(each) for each in outcome.format_lost]
        body["format_lost"] = lost if req.batch else lost[0]
    body.update(outcome.verdicts.body(req.batch))  # `qa`: each text's failed checks (not with qa off)
    body.update(memory_use.memory_fields(outcome.memory, outcome.memory_unguided, req.batch))
    body.update(latency_ms=round(call.elapsed_ms(), 1), request_id=call.id, model=replica.engine.model_name)
    return body


def _not_on_a_chimera(replica: ReplicaContext) -> None:
    """A Chimera replica refuses plain /translate: it has no prompt but the fusion of candidates."""
    if replica.family == CHIMERA:
        raise ApiError(
            400,
            "fusion_only",
            f"{replica.engine.model_name} is a Hunyuan-MT-Chimera model (prompt family chimera): it fuses "
            "candidate translations, it does not translate a text alone; POST /fuse {source_lang, "
            'target_lang, text, candidates}, or ask a translation replica for "ensemble"',
        )


async def _translate(replica: ReplicaContext, call: Call) -> Response:
    _not_on_a_chimera(replica)
    raw = await call.body()
    req = parse_translate(
        raw, replica.cfg, replica.sampling, replica.engine.max_model_len, replica.engine.model_name
    )
    call.settle(replica.admission, req.priority, len(req.texts))  # a batch is bulk unless told otherwise
    if req.source is AUTO:  # no source_lang: detected (replica.apis.compat); a mixed batch per language
        req, mixed = compat.detected_source(replica, req)
        if mixed and req.ensemble and not replica.cfg.ensemble_candidates:
            raise ApiError(400, "invalid_ensemble", "ensemble needs one source language: give source_lang")
        if mixed:
            return await compat.native_mixed(replica, call, req)
    await call.bill(req.texts)  # per key: refused past its limit, counted once answered
    call.log.update(source_lang=req.source.code, target_lang=req.target.code, texts=len(req.texts))
    if req.asked().used():
        call.log["features"] = list(req.asked().used())
    if req.stream:
        # Checked here (prompt, budget), before the response starts, so a refusal is a plain 4xx.
        start = await call.run(replica.translator.stream_start(req, call.caller()))
        if start.whole is not None:  # the memory's answer, sent whole: no engine
            return sse.response(_whole_events(replica, req, call, start.whole), call)
        return sse.response(_events(replica, req, call, start), call)
    if req.ensemble:
        return await _ensemble(replica, req, call)
    outcome = await call.run(replica.translator.translate(req, call.caller()))
    call.note(outcome)
    headers = {"X-Request-ID": call.id, **outcome.verdicts.headers()}
    return JSONResponse(_answer(replica, req, outcome, call), headers=headers)


async def _sample_and_fuse(
    replica: ReplicaContext, req: TranslateRequest, call: Call
) -> tuple[Outcome, list[ensemble.Fused]]:
    # N candidates per text, one engine call each.
    outcome = await replica.translator.translate(req, call.caller())
    key = ensemble.caller_key(call.request)
    return outcome, await replica.fusion.fuse_all(req, outcome.candidates, call.id, key)


async def _ensemble(replica: ReplicaContext, req: TranslateRequest, call: Call) -> Response:
    """`ensemble`: each text's candidates, fused by the Chimera pool or (degraded) the first of them."""
    call.log["ensemble"] = req.ensemble
    outcome, answers = await call.run(_sample_and_fuse(replica, req, call))
    outcome.verdicts = replica.translator.review.fused(req, [each.result for each in answers])
    call.note(outcome)
    call.log["fused"] = sum(each.fused_by is not None for each in answers)
    degraded = [each.reason for each in answers if each.fused_by is None]
    if degraded:
        call.log["fusion_degraded"] = degraded[0]
    ensemble.refuse_if_degraded(replica.cfg, answers)
    body = _answer(replica, req, outcome, call)
    body.update(ensemble.answer_fields(req.batch, answers))
    headers = {"X-Request-ID": call.id, **ensemble.fusion_header(answers), **outcome.verdicts.headers()}
    return JSONResponse(body, headers=headers)


async def _whole_events(
    replica: ReplicaContext, req: TranslateRequest, call: Call, outcome: Outcome
) -> AsyncIterator[str]:
    call.note(outcome)
    yield sse.event({"delta": outcome.results[0]})
    yield sse.event({"done": True, **_answer(replica, req, outcome, call)})


async def _events(
    replica: ReplicaContext, req: TranslateRequest, call: Call, start: StreamStart
) -> AsyncIterator[str]:
    """`stream: true`: {"delta": text} events as the text grows, then {"done": true, ...the answer}.

    A deadline or engine failure after the first byte is a last {"error": {...}} event.
    """
    final: Delta | None = None
    try:
        # Closed with this generator (the client left): the engine request is aborted at once.
        deltas = start.deltas
        assert deltas is not None, "a stream without deltas is answered whole"
        async with contextlib.aclosing(sse.within(deltas, call, replica.cfg.request_timeout_s)) as steps:
            async for delta in steps:
                if delta.final is not None:
                    final = delta
                elif delta.text:
                    yield sse.event({"delta": delta.text})
    except ApiError as err:
        yield sse.event({"error": {"code": err.code, "message": err.message}})
        return
    if final is None or final.final is None:
        return
    done = final.final
    outcome = Outcome(
        results=[done.text],
        cached=[final.cached],
        prompt_tokens=done.prompt_tokens,
        output_tokens=done.output_tokens,
        queue_s=done.queue_s,
        engine_s=done.engine_s,
        memory=start.memory,
        memory_unguided=start.memory_unguided,
    )
    # Checked once whole; a stream already sent cannot be retried, so its checks only flag.
    outcome.verdicts = replica.translator.review.judge(req, [done.text], [done.finish_reason])
    replica.translator.review.count(outcome.verdicts.flags)
    call.note(outcome)
    yield sse.event({"done": True, **_answer(replica, req, outcome, call)})


async def _fuse(replica: ReplicaContext, call: Call) -> Response:
    """The Chimera's fusion of one text's candidates: its README prompt, then the shared engine path."""
    if replica.family != CHIMERA:
        raise ApiError(
            400,
            "fusion_unsupported",
            f"POST /fuse needs a Hunyuan-MT-Chimera replica (prompt family chimera); this one serves "
            f"{replica.engine.model_name} with prompt family {replica.family}",
        )
    req = parse_fuse(await call.body(), replica.cfg, replica.sampling, replica.engine.max_model_len)
    prompt = chimera.fusion_prompt(req.source, req.target, req.text, req.candidates)
    replica.translator.check_prompt(prompt, req.sampling, "text with its candidates")
    content = prompt.messages[0]["content"]
    # The digest of the fused prompt, so a log line shows which prompt was served without its text.
    digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
    call.log.update(source_lang=req.source.code, target_lang=req.target.code, texts=1)
    call.log.update(candidates=len(req.candidates), prompt_sha256=digest)
    [done] = await call.run(replica.translator.complete([prompt], req.sampling, call.caller()))
    gen = done.generation
    outcome = Outcome(results=[gen.text], cached=[done.cached], prompt_tokens=gen.prompt_tokens)
    outcome.output_tokens, outcome.queue_s, outcome.engine_s = gen.output_tokens, gen.queue_s, gen.engine_s
    call.note(outcome)
    body: dict[str, Any] = {"source_lang": req.source.code, "target_lang": req.target.code}
    body["result"] = gen.text
    body.update(cached=done.cached, latency_ms=round(call.elapsed_ms(), 1), request_id=call.id)
    body["model"] = replica.engine.model_name
    return JSONResponse(body, headers={"X-Request-ID": call.id})


# Not in the front's document: a Chimera pool's, reached through /_hs/pool/NAME/ only.
@router.post("/fuse", include_in_schema=False)
async def fuse(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_fuse, replica))


@router.post("/translate")
async def translate(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_translate, replica))


@router.get("/languages")
async def languages() -> dict[str, Any]:
    return {
        "languages": [
            {
                "code": lang.code,
                "name": lang.name,
                "native_name": lang.native_name,
                "chinese_name": lang.chinese_name,
            }
            for lang in LANGUAGES
        ]
    }


# What the app mounts and what the OpenAPI document says of each operation (edge/dialects.py names us).
ROUTERS = (router,)
OPERATIONS: Operations = {
    ("post", "/translate"): Op(
        rs.translate_body,
        errors=(*TRANSLATE, (404, "model_not_found"), (413, "text_too_long"), (503, "chimera_failed")),
        success={200: (JSON, SSE)},
        checked=True,
    ),
    ("get", "/languages"): Op(gated=False),
}

"""Our own API: POST /translate (one text or a batch) and GET /languages."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from hunyuan_serve.languages import AUTO, LANGUAGES
from hunyuan_serve.replica.apis import compat, sse
from hunyuan_serve.replica.context import Replica, current
from hunyuan_serve.replica.engine import Delta
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.http import Call
from hunyuan_serve.replica.schema import TranslateRequest, parse_translate
from hunyuan_serve.replica.service import Outcome

router = APIRouter()
ReplicaDep = Annotated[Replica, Depends(current)]


def render_error(err: ApiError) -> JSONResponse:
    """Our error shape: {"error": {"code", "message"}}."""
    body = {"error": {"code": err.code, "message": err.message}}
    return JSONResponse(body, status_code=err.status, headers=err.headers)


def _answer(replica: Replica, req: TranslateRequest, outcome: Outcome, call: Call) -> dict[str, Any]:
    body: dict[str, Any] = {"source_lang": req.source.code, "target_lang": req.target.code}
    if req.batch:
        body.update(results=outcome.results, cached=outcome.cached)
    else:
        body.update(result=outcome.results[0], cached=outcome.cached[0])
    if req.preserve_format:
        # The markup each text lost on the way (opening + closing tag); its text is returned without it.
        lost = [list(each) for each in outcome.format_lost]
        body["format_lost"] = lost if req.batch else lost[0]
    body.update(latency_ms=round(call.elapsed_ms(), 1), request_id=call.id, model=replica.engine.model_name)
    return body


async def _translate(replica: Replica, call: Call) -> Response:
    raw = await call.body()
    req = parse_translate(raw, replica.cfg, replica.sampling, replica.engine.max_model_len)
    if req.source is AUTO:  # no source_lang: detected (replica.apis.compat); a mixed batch per language
        req, mixed = compat.detected_source(replica, req)
        if mixed:
            return await compat.native_mixed(replica, call, req)
    await call.bill(req.texts)  # per key: refused past its limit, counted once answered
    call.log.update(source_lang=req.source.code, target_lang=req.target.code, texts=len(req.texts))
    if req.asked().used():
        call.log["features"] = list(req.asked().used())
    if req.stream:
        # Checked here (prompt, budget), before the response starts, so a refusal is a plain 4xx.
        deltas = replica.translator.stream_translation(req, call.id)
        return sse.response(_events(replica, req, call, deltas), call)
    outcome = await call.run(replica.translator.translate(req, call.id))
    call.note(outcome)
    return JSONResponse(_answer(replica, req, outcome, call), headers={"X-Request-ID": call.id})


async def _events(
    replica: Replica, req: TranslateRequest, call: Call, deltas: AsyncGenerator[Delta, None]
) -> AsyncIterator[str]:
    """`stream: true`: {"delta": text} events as the text grows, then {"done": true, ...the answer}.

    A deadline or engine failure after the first byte is a last {"error": {...}} event.
    """
    final: Delta | None = None
    try:
        # Closed with this generator (the client left): the engine request is aborted at once.
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
    )
    call.note(outcome)
    yield sse.event({"done": True, **_answer(replica, req, outcome, call)})


@router.post("/translate")
async def translate(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_translate, replica), render_error)


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

"""OpenAI-compatible API: GET /v1/models, POST /v1/chat/completions and /v1/completions (streamed or not)."""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from hunyuan_serve.edge.dialects import OPENAI
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.apis import compat_schemas as cs
from hunyuan_serve.replica.apis import openai_tasks, sse
from hunyuan_serve.replica.apis.openai_schema import WEBLATE_SEPARATOR, Parsed, parse_chat, parse_completion
from hunyuan_serve.replica.context import ReplicaContext, current
from hunyuan_serve.replica.engine.interface import Delta, Generation
from hunyuan_serve.replica.errors import ApiError, render_error
from hunyuan_serve.replica.openapi.operations import COMPAT, JSON, SSE, Op, Operations
from hunyuan_serve.replica.outcome import Completion, Outcome

router = APIRouter(prefix="/v1")
ReplicaDep = Annotated[ReplicaContext, Depends(current)]


def _finish(reason: str | None) -> str:
    return "length" if reason == "length" else "stop"


def _usage(prompt_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": prompt_tokens + output_tokens,
    }


def _outcome(completions: list[Completion]) -> Outcome:
    """What the request log reports, from each prompt's answer."""
    gens = [c.generation for c in completions]
    return Outcome(
        results=[g.text for g in gens],
        cached=[c.cached for c in completions],
        prompt_tokens=sum(g.prompt_tokens for g in gens),
        output_tokens=sum(g.output_tokens for g in gens),
        queue_s=max(g.queue_s for g in gens),
        engine_s=max(g.engine_s for g in gens),
    )


@dataclass(frozen=True)
class Shape:
    """Chat or text completion: the object names and how a choice carries its text."""

    chat: bool

    def head(self, call: Call, model: str, chunk: bool) -> dict[str, Any]:
        kind = ("chat.completion.chunk" if chunk else "chat.completion") if self.chat else "text_completion"
        prefix = "chatcmpl" if self.chat else "cmpl"
        return {"id": f"{prefix}-{call.id}", "object": kind, "created": int(time.time()), "model": model}

    def choice(self, index: int, text: str, finish: str | None, chunk: bool) -> dict[str, Any]:
        if not self.chat:
            return {"index": index, "text": text, "logprobs": None, "finish_reason": finish}
        if chunk:
            return {
                "index": index,
                "delta": {"content": text} if text else {},
                "logprobs": None,
                "finish_reason": finish,
            }
        message = {"role": "assistant", "content": text}
        return {"index": index, "message": message, "logprobs": None, "finish_reason": finish}


async def _one(text: str, outcome: Outcome) -> AsyncGenerator[Delta, None]:
    """An answer already whole (Weblate's batch), as a stream of one delta, with the batch's counts."""
    yield Delta(text)
    yield Delta("", Generation(text, outcome.prompt_tokens, outcome.output_tokens, "stop"))


async def _chunks(
    replica: ReplicaContext, call: Call, parsed: Parsed, shape: Shape, deltas: AsyncGenerator[Delta, None]
) -> AsyncIterator[str]:
    """SSE chunks: the role first (chat), the text as it grows, the finish_reason, usage if asked, [DONE]."""
    head = shape.head(call, replica.engine.model_name, chunk=True)
    extra: dict[str, Any] = {"usage": None} if parsed.include_usage else {}
    if shape.chat:
        first = {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
        yield sse.event({**head, "choices": [first], **extra})
    final: Delta | None = None
    try:
        async with contextlib.aclosing(sse.within(deltas, call, replica.cfg.request_timeout_s)) as steps:
            async for delta in steps:
                if delta.final is not None:
                    final = delta
                elif delta.text:
                    yield sse.event({**head, "choices": [shape.choice(0, delta.text, None, True)], **extra})
    except ApiError as err:
        yield sse.event(json.loads(bytes(render_error(OPENAI, err).body)))
        yield sse.event("[DONE]")
        return
    if final is None or final.final is None:
        return
    done = final.final
    if parsed.weblate is None and parsed.task is None:
        call.note(_outcome([Completion(done, final.cached)]))
    yield sse.event({**head, "choices": [shape.choice(0, "", _finish(done.finish_reason), True)], **extra})
    if parsed.include_usage:
        yield sse.event({**head, "choices": [], "usage": _usage(done.prompt_tokens, done.output_tokens)})
    yield sse.event("[DONE]")


async def _weblate(replica: ReplicaContext, call: Call, parsed: Parsed, shape: Shape) -> Response:
    """Each string its own prompt in the family's template, one batch; answered joined as Weblate sent it."""
    req = parsed.weblate
    assert req is not None  # narrowed by the caller
    call.log.update(
        source_lang=req.source.code, target_lang=req.target.code, texts=len(req.texts), weblate=True
    )
    await call.bill(req.texts)  # per key: refused past its limit, counted once answered
    outcome = await call.run(replica.translator.translate(req, call.caller()))
    call.note(outcome)
    answers = iter(outcome.results)
    text = WEBLATE_SEPARATOR.join(next(answers) if part.strip() else part for part in parsed.weblate_parts)
    return _whole(replica, call, parsed, shape, text, outcome)


async def _task(replica: ReplicaContext, call: Call, parsed: Parsed, shape: Shape) -> Response:
    """A tool's structured task (Weblate's, Tolgee's, SubtitleEdit's): each string in the family's
    template, one batch; the answer its tool reads built here, so it is valid and as long as the strings
    sent."""
    task = parsed.task
    assert task is not None  # narrowed by the caller
    call.log.update(source_lang=task.source.code, target_lang=task.target.code, texts=len(task.strings))
    # Several strings are bulk unless the key or X-Priority says otherwise, as a batch elsewhere is.
    call.settle(replica.admission, None, len(task.strings))
    text, outcome = await openai_tasks.answer(replica, call, task)
    return _whole(replica, call, parsed, shape, text, outcome)


def _whole(
    replica: ReplicaContext, call: Call, parsed: Parsed, shape: Shape, text: str, outcome: Outcome
) -> Response:
    """An answer built whole from a batch of translations, as one choice (or a stream of one delta)."""
    qa = outcome.verdicts.headers()  # per string sent; not in a stream (headers go first)
    if parsed.stream:
        return sse.response(_chunks(replica, call, parsed, shape, _one(text, outcome)), call)
    body = shape.head(call, replica.engine.model_name, chunk=False)
    body.update(
        choices=[shape.choice(0, text, "stop", False)],
        usage=_usage(outcome.prompt_tokens, outcome.output_tokens),
    )
    return JSONResponse(body, headers={"X-Request-ID": call.id, **qa})


async def _answer(replica: ReplicaContext, call: Call, parsed: Parsed, shape: Shape) -> Response:
    if parsed.weblate is not None:
        return await _weblate(replica, call, parsed, shape)
    if parsed.task is not None:
        return await _task(replica, call, parsed, shape)
    translator = replica.translator
    where = "messages" if shape.chat else "prompt"
    call.log.update(texts=len(parsed.prompts))
    # Per key: the prompts' characters as sent, refused past the key's limit, counted once answered.
    sent = [m["content"] for p in parsed.prompts for m in p.messages] + [p.text for p in parsed.prompts]
    await call.bill(sent)
    if parsed.stream:
        # Checked here, before the response starts, so a prompt over the budget is a plain 4xx.
        deltas = translator.stream_prompt(parsed.prompts[0], parsed.sampling, call.caller(), where)
        return sse.response(_chunks(replica, call, parsed, shape, deltas), call)
    for index, prompt in enumerate(parsed.prompts):
        translator.check_prompt(prompt, parsed.sampling, where if shape.chat else f"prompt[{index}]")
    completions = await call.run(translator.complete(list(parsed.prompts), parsed.sampling, call.caller()))
    outcome = _outcome(completions)
    # A prompt as written names no languages: the checks that need none (loop, truncated), per choice.
    outcome.verdicts = translator.review.generations([c.generation for c in completions])
    translator.review.count(outcome.verdicts.flags)
    call.note(outcome)
    body = shape.head(call, replica.engine.model_name, chunk=False)
    choices = [
        shape.choice(index, c.generation.text, _finish(c.generation.finish_reason), False)
        for index, c in enumerate(completions)
    ]
    body.update(choices=choices, usage=_usage(outcome.prompt_tokens, outcome.output_tokens))
    return JSONResponse(body, headers={"X-Request-ID": call.id, **outcome.verdicts.headers()})


async def _chat(replica: ReplicaContext, call: Call) -> Response:
    return await _answer(replica, call, parse_chat(await call.body(), replica), Shape(chat=True))


async def _completion(replica: ReplicaContext, call: Call) -> Response:
    return await _answer(replica, call, parse_completion(await call.body(), replica), Shape(chat=False))


@router.post("/chat/completions")
async def chat_completions(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_chat, replica))


@router.post("/completions")
async def completions(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_completion, replica))


def _model_card(replica: ReplicaContext) -> dict[str, Any]:
    return {
        "id": replica.engine.model_name,
        "object": "model",
        "created": 0,
        "owned_by": "hunyuan-serve",
        "max_model_len": replica.engine.max_model_len,
    }


@router.get("/models")
async def models(replica: ReplicaDep) -> dict[str, Any]:
    """The one model served; its id is what clients send as `model`."""
    return {"object": "list", "data": [_model_card(replica)]}


@router.get("/models/{model:path}")
async def model(model: str, replica: ReplicaDep) -> Response:
    if model != replica.engine.model_name:
        return render_error(
            OPENAI, ApiError(404, "model_not_found", f"the model '{model[:100]}' does not exist")
        )
    return JSONResponse(_model_card(replica))


# What the app mounts and what the OpenAPI document says of each operation (edge/dialects.py names us).
ROUTERS = (router,)
OPERATIONS: Operations = {
    ("post", "/v1/chat/completions"): Op(
        cs.chat_body, errors=(*COMPAT, (404, "model_not_found")), success={200: (JSON, SSE)}, checked=True
    ),
    ("post", "/v1/completions"): Op(
        cs.completion_body,
        errors=(*COMPAT, (404, "model_not_found")),
        success={200: (JSON, SSE)},
        checked=True,
    ),
    ("get", "/v1/models"): Op(gated=False),
    ("get", "/v1/models/{model}"): Op(gated=False, errors=((404, "model_not_found"),)),
}

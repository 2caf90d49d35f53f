"""OpenAI-compatible API: GET /v1/models, POST /v1/chat/completions and /v1/completions (streamed or not)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.languages import Language, UnknownLanguage, find_language
from hunyuan_serve.replica.apis import sse
from hunyuan_serve.replica.context import Replica, current
from hunyuan_serve.replica.engine import Delta, Generation, Sampling
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.http import Call
from hunyuan_serve.replica.schema import TranslateRequest, decode_body, parse_sampling
from hunyuan_serve.replica.service import Completion, Outcome

router = APIRouter(prefix="/v1")
ReplicaDep = Annotated[Replica, Depends(current)]

# Weblate's OpenAI backend (weblate/machinery/openai.py): strings joined by SEPARATOR in one user message,
# the languages in its system prompt ("from language 'en'\nto language 'cs'"); it splits the answer on it.
WEBLATE_SEPARATOR = "\n==WEBLATE_PART==\n"
_WEBLATE_LANGUAGES = re.compile(r"from language '([^'\n]{1,64})'\s+to language '([^'\n]{1,64})'")

# Fields that do not change the answer (accepted, ignored) and those we cannot honour (a 400 naming them,
# unless sent with the value that means "off").
_IGNORED = {"user", "store", "metadata", "service_tier", "parallel_tool_calls", "reasoning_effort"}
_OFF_VALUES: dict[str, tuple[Any, ...]] = {
    "n": (None, 1),
    "tools": (None, []),
    "tool_choice": (None, "none"),
    "functions": (None, []),
    "function_call": (None, "none"),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "logit_bias": (None, {}),
    "response_format": (None, {"type": "text"}),
    "modalities": (None, ["text"]),
    "audio": (None,),
    "prediction": (None,),
    "seed": (None,),
    "echo": (None, False),
    "suffix": (None, ""),
    "best_of": (None, 1),
}
_SAMPLING = {"temperature", "top_p", "top_k", "repetition_penalty", "max_tokens", "max_completion_tokens"}
_COMMON = {"model", "stream", "stream_options", "stop", "presence_penalty", "frequency_penalty", *_SAMPLING}
_CHAT_KEYS = {"messages", *_COMMON, *_IGNORED, *_OFF_VALUES} - {"echo", "suffix", "best_of"}
_COMPLETION_KEYS = {"prompt", *_COMMON, *_IGNORED, *_OFF_VALUES} - {"tools", "tool_choice", "functions"}
_ROLES = {"system", "developer", "user", "assistant"}
MAX_STOPS = 4  # OpenAI's own limit


def render_error(err: ApiError) -> JSONResponse:
    """OpenAI's error shape; validation errors are 400 there (it has no 422)."""
    status = 400 if err.status == 422 else err.status
    kind = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}.get(status)
    kind = kind or ("server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": err.message, "type": kind, "param": None, "code": err.code}}
    return JSONResponse(body, status_code=status, headers=err.headers)


def _bad(code: str, message: str) -> ApiError:
    return ApiError(400, code, message)


@dataclass(frozen=True)
class Parsed:
    """A checked request: its prompts (or Weblate's strings), sampling and stream options."""

    prompts: tuple[Prompt, ...]
    sampling: Sampling
    stream: bool
    include_usage: bool
    weblate: TranslateRequest | None = None
    weblate_parts: tuple[str, ...] = ()  # every string as sent; blank ones are answered as they came


def _check_fields(data: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise _bad("unknown_parameter", f"unrecognized request argument(s): {', '.join(unknown)[:200]}")
    for key, off in _OFF_VALUES.items():
        if key in data and data[key] not in off:
            raise _bad("unsupported_parameter", f"{key}={json.dumps(data[key])[:40]} is not supported here")


def _model(data: dict[str, Any], served: str) -> None:
    model = data.get("model")
    if model is None:
        return  # lenient: the one model served
    if not isinstance(model, str):
        raise _bad("invalid_parameter", "model must be a string")
    if model != served:
        raise ApiError(
            404, "model_not_found", f"the model '{model[:100]}' does not exist; this server serves '{served}'"
        )


def _penalty(data: dict[str, Any], key: str) -> float:
    value = data.get(key)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad("invalid_parameter", f"{key} must be a number, got {json.dumps(value)[:40]}")
    if not -2.0 <= value <= 2.0:
        raise _bad("invalid_parameter", f"{key} must be in [-2, 2], got {value}")
    return float(value)


def _sampling(data: dict[str, Any], replica: Replica) -> Sampling:
    """OpenAI's fields onto ours (the family's defaults where none is sent); top_k and repetition_penalty
    are vLLM's extra body fields."""
    fields = {key: data[key] for key in _SAMPLING if key in data}
    if "max_completion_tokens" in fields:
        fields.setdefault("max_tokens", fields.pop("max_completion_tokens"))
        fields.pop("max_completion_tokens", None)
    base = parse_sampling(fields, replica.sampling, replica.cfg.max_tokens, replica.engine.max_model_len)
    return dataclasses.replace(
        base,
        presence_penalty=_penalty(data, "presence_penalty"),
        frequency_penalty=_penalty(data, "frequency_penalty"),
    )


def _stops(data: dict[str, Any]) -> tuple[str, ...]:
    stop = data.get("stop")
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise _bad("invalid_parameter", "stop must be a non-empty string or a list of them")
    if len(stops) > MAX_STOPS:
        raise _bad("invalid_parameter", f"stop has {len(stops)} strings; the limit is {MAX_STOPS}")
    return tuple(stops)


def _stream_options(data: dict[str, Any]) -> tuple[bool, bool]:
    stream = data.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise _bad("invalid_parameter", "stream must be true or false")
    options = data.get("stream_options")
    if options is None:
        return stream, False
    if not isinstance(options, dict) or set(options) - {"include_usage", "include_obfuscation"}:
        raise _bad("invalid_parameter", "stream_options must be an object with include_usage")
    usage = options.get("include_usage", False)
    if not isinstance(usage, bool):
        raise _bad("invalid_parameter", "stream_options.include_usage must be true or false")
    return stream, usage


def _text(value: Any, where: str) -> str:
    """A message's content: a string, or OpenAI's list of text parts (joined)."""
    if isinstance(value, list):
        parts = []
        for index, part in enumerate(value):
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise _bad(
                    "unsupported_content", f"{where}[{index}] must be a text part; only text is supported"
                )
            parts.append(part["text"])
        value = "\n".join(parts)
    if not isinstance(value, str):
        raise _bad("invalid_parameter", f"{where} must be a string or a list of text parts")
    if "\x00" in value:
        raise _bad("invalid_text", f"{where} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad("invalid_text", f"{where} contains a lone surrogate (\\u escape)") from None
    return value


def _messages(data: dict[str, Any], cfg: ReplicaConfig) -> list[tuple[str, str]]:
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise _bad("invalid_parameter", "messages must be a list of {role, content} objects")
    if not messages:
        raise _bad("empty_messages", "messages must not be empty")
    if len(messages) > cfg.max_chat_messages:
        limit = cfg.max_chat_messages
        raise _bad("too_many_messages", f"{len(messages)} messages; the limit is {limit} (max_chat_messages)")
    out: list[tuple[str, str]] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict) or set(message) - {"role", "content", "name"}:
            raise _bad("invalid_parameter", f"{where} must be an object with role and content (name allowed)")
        role = message.get("role")
        if role not in _ROLES:
            raise _bad("unsupported_role", f"{where}.role must be one of {', '.join(sorted(_ROLES))}")
        content = message.get("content")
        out.append(
            (role, "" if content is None and role == "assistant" else _text(content, where + ".content"))
        )
    if not any(role == "user" for role, _ in out):
        raise _bad("missing_user_message", "messages need at least one user message")
    return out


def system_text(messages: list[tuple[str, str]]) -> str:
    """Every system (or developer) message's text, in order, a blank line between them."""
    return "\n\n".join(text for role, text in messages if role in {"system", "developer"} and text.strip())


def fold_system(messages: list[tuple[str, str]], mode: str) -> tuple[dict[str, str], ...]:
    """The chat without system turns: the models have no system prompt, so with `prepend` the system
    text and a blank line open the first user message; `drop` leaves it out; `reject` is a 400."""
    system = system_text(messages)
    if system and mode == "reject":
        raise _bad(
            "unsupported_system_prompt", "system messages are refused here (system_prompt_mode reject)"
        )
    turns: list[dict[str, str]] = []
    for role, text in messages:
        if role in {"system", "developer"}:
            continue
        if role == "user" and system and mode == "prepend" and not any(t["role"] == "user" for t in turns):
            text = f"{system}\n\n{text}"
        turns.append({"role": role, "content": text})
    return tuple(turns)


def _language(code: str) -> Language:
    try:
        return find_language(code)
    except UnknownLanguage as err:
        raise _bad("unsupported_language", f"Weblate's system prompt names {err}") from None


def weblate_request(
    messages: list[tuple[str, str]], sampling: Sampling, cfg: ReplicaConfig
) -> tuple[TranslateRequest, tuple[str, ...]] | None:
    """A Weblate chat (system prompt naming the languages, then one user message of strings) as a batch
    of its strings, the blank ones left out; None when it is not one."""
    found = _WEBLATE_LANGUAGES.search(system_text(messages))
    users = [text for role, text in messages if role == "user"]
    if (
        not cfg.weblate_split
        or found is None
        or len(users) != 1
        or any(r == "assistant" for r, _ in messages)
    ):
        return None
    parts = tuple(users[0].split(WEBLATE_SEPARATOR))
    texts = tuple(part for part in parts if part.strip())
    if not texts:
        raise _bad("empty_text", "every string of the Weblate request is empty")
    if len(texts) > cfg.max_batch_texts:
        raise _bad(
            "too_many_texts", f"{len(texts)} strings in one request; the limit is {cfg.max_batch_texts}"
        )
    source, target = _language(found.group(1)), _language(found.group(2))
    return TranslateRequest(texts=texts, batch=True, source=source, target=target, sampling=sampling), parts


def parse_chat(raw: bytes, replica: Replica) -> Parsed:
    data = decode_body(raw)
    _check_fields(data, _CHAT_KEYS)
    _model(data, replica.engine.model_name)
    messages = _messages(data, replica.cfg)
    stream, usage = _stream_options(data)
    sampling = _sampling(data, replica)
    stops = _stops(data)
    # Weblate's chat is matched on its system text, whatever system_prompt_mode does with others.
    packed = weblate_request(messages, sampling, replica.cfg)
    if packed is not None:
        return Parsed((), sampling, stream, usage, packed[0], packed[1])
    turns = fold_system(messages, replica.cfg.system_prompt_mode)
    return Parsed((Prompt(messages=turns, stop=stops),), sampling, stream, usage)


def parse_completion(raw: bytes, replica: Replica) -> Parsed:
    data = decode_body(raw)
    _check_fields(data, _COMPLETION_KEYS)
    _model(data, replica.engine.model_name)
    prompt = data.get("prompt")
    items = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(items, list) or not items:
        raise _bad("invalid_parameter", "prompt must be a string or a non-empty list of strings")
    if len(items) > replica.cfg.max_batch_texts:
        raise _bad("too_many_prompts", f"{len(items)} prompts; the limit is {replica.cfg.max_batch_texts}")
    texts = [
        _text(item, f"prompt[{index}]") if isinstance(item, str) else None for index, item in enumerate(items)
    ]
    if any(text is None or not text.strip() for text in texts):
        raise _bad("invalid_parameter", "every prompt must be a non-blank string (token ids are not taken)")
    stream, usage = _stream_options(data)
    if stream and len(items) > 1:
        raise _bad("unsupported_parameter", "stream works with one prompt, not a list")
    stops = _stops(data)
    prompts = tuple(Prompt(text=text, stop=stops) for text in texts if text is not None)
    return Parsed(prompts, _sampling(data, replica), stream, usage)


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


async def _one(text: str, output_tokens: int) -> AsyncGenerator[Delta, None]:
    """An answer already whole (Weblate's batch), as a stream of one delta."""
    yield Delta(text)
    yield Delta("", Generation(text, 0, output_tokens, "stop"))


async def _chunks(
    replica: Replica, call: Call, parsed: Parsed, shape: Shape, deltas: AsyncGenerator[Delta, None]
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
        yield sse.event(json.loads(bytes(render_error(err).body)))
        yield sse.event("[DONE]")
        return
    if final is None or final.final is None:
        return
    done = final.final
    if parsed.weblate is None:
        call.note(_outcome([Completion(done, final.cached)]))
    yield sse.event({**head, "choices": [shape.choice(0, "", _finish(done.finish_reason), True)], **extra})
    if parsed.include_usage:
        yield sse.event({**head, "choices": [], "usage": _usage(done.prompt_tokens, done.output_tokens)})
    yield sse.event("[DONE]")


async def _weblate(replica: Replica, call: Call, parsed: Parsed, shape: Shape) -> Response:
    """Each string its own prompt in the family's template, one batch; answered joined as Weblate sent it."""
    req = parsed.weblate
    assert req is not None  # narrowed by the caller
    call.log.update(
        source_lang=req.source.code, target_lang=req.target.code, texts=len(req.texts), weblate=True
    )
    outcome = await call.run(replica.translator.translate(req, call.id))
    call.note(outcome)
    answers = iter(outcome.results)
    text = WEBLATE_SEPARATOR.join(next(answers) if part.strip() else part for part in parsed.weblate_parts)
    if parsed.stream:
        return sse.response(_chunks(replica, call, parsed, shape, _one(text, outcome.output_tokens)), call)
    body = shape.head(call, replica.engine.model_name, chunk=False)
    body.update(
        choices=[shape.choice(0, text, "stop", False)],
        usage=_usage(outcome.prompt_tokens, outcome.output_tokens),
    )
    return JSONResponse(body, headers={"X-Request-ID": call.id})


async def _answer(replica: Replica, call: Call, parsed: Parsed, shape: Shape) -> Response:
    if parsed.weblate is not None:
        return await _weblate(replica, call, parsed, shape)
    translator = replica.translator
    where = "messages" if shape.chat else "prompt"
    call.log.update(texts=len(parsed.prompts))
    if parsed.stream:
        # Checked here, before the response starts, so a prompt over the budget is a plain 4xx.
        deltas = translator.stream_prompt(parsed.prompts[0], parsed.sampling, call.id, where)
        return sse.response(_chunks(replica, call, parsed, shape, deltas), call)
    for index, prompt in enumerate(parsed.prompts):
        translator.check_prompt(prompt, parsed.sampling, where if shape.chat else f"prompt[{index}]")
    completions = await call.run(translator.complete(list(parsed.prompts), parsed.sampling, call.id))
    outcome = _outcome(completions)
    call.note(outcome)
    body = shape.head(call, replica.engine.model_name, chunk=False)
    choices = [
        shape.choice(index, c.generation.text, _finish(c.generation.finish_reason), False)
        for index, c in enumerate(completions)
    ]
    body.update(choices=choices, usage=_usage(outcome.prompt_tokens, outcome.output_tokens))
    return JSONResponse(body, headers={"X-Request-ID": call.id})


async def _chat(replica: Replica, call: Call) -> Response:
    return await _answer(replica, call, parse_chat(await call.body(), replica), Shape(chat=True))


async def _completion(replica: Replica, call: Call) -> Response:
    return await _answer(replica, call, parse_completion(await call.body(), replica), Shape(chat=False))


@router.post("/chat/completions")
async def chat_completions(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_chat, replica), render_error)


@router.post("/completions")
async def completions(request: Request, replica: ReplicaDep) -> Response:
    return await replica.gate.serve(request, functools.partial(_completion, replica), render_error)


def _model_card(replica: Replica) -> dict[str, Any]:
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
        return render_error(ApiError(404, "model_not_found", f"the model '{model[:100]}' does not exist"))
    return JSONResponse(_model_card(replica))

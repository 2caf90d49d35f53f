"""What every API's translation route shares: admission, the request's class, log line and metrics."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from fastapi import Request, Response
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from hunyuan_serve.auth import KEY_ID_STATE
from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.replica import review
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.admission.in_flight import Admission
from hunyuan_serve.replica.admission.intake import ARRIVED, SCREENED
from hunyuan_serve.replica.errors import ApiError, renderer, request_fault
from hunyuan_serve.replica.http import ClientDisconnected, guarded, read_body, request_id
from hunyuan_serve.replica.memories import use as memory_use
from hunyuan_serve.replica.metrics import Metrics
from hunyuan_serve.replica.outcome import Outcome
from hunyuan_serve.replica.usage import Usage, key_label

ACCESS_LOG = "hunyuan_serve.replica.access"
# Nginx's code for "client closed request"; nobody reads the response, but the log and metrics do.
CLIENT_CLOSED = 499
# Refusals counted by reason in hunyuan_rejections, by the ApiError code that says so.
_REJECTION_REASONS = {"overloaded": "overload", "deadline_exceeded": "deadline"}
T = TypeVar("T")

# Each API answers errors in its own shape (ours, OpenAI's, DeepL's...): the adapter passes its renderer.
ErrorRenderer = Callable[[ApiError], Response]


class Call:
    """One admitted request as its adapter sees it: its id, its body, its deadline, its log fields."""

    def __init__(self, request: Request, cfg: ReplicaConfig, usage: Usage | None = None) -> None:
        self.request = request
        self.id = request_id(request)
        self.started = time.monotonic()
        self.log: dict[str, Any] = {"request_id": self.id, "cached": False}
        state = request.scope.get("state", {})
        if ARRIVED in state:  # the time it waited to be taken in (admission/intake.py)
            self.log["intake_ms"] = round((self.started - state[ARRIVED]) * 1000, 1)
        # Its wait judged as it came to wait in the intake (Admission.screen): not judged again.
        self.screened = bool(state.get(SCREENED))
        self._cfg = cfg
        # The caller's key_id, left by the key check (None without a keys file); characters to bill.
        self.owner: str | None = state.get(KEY_ID_STATE)
        self.billed = 0
        self._usage = usage
        if self.owner is not None:
            self.log["key"] = key_label(self.owner)
        self.priority = priority.INTERACTIVE

    def classify(self, key_defaults: Mapping[str, str]) -> None:
        """Decide the request's class before admission: the X-Priority header, else the key's default.

        The body is not read yet here, so a native body's `priority` field and the text count are
        not consulted at admission; every endpoint's default at this point is interactive.
        """
        self._key_default = key_defaults.get(self.owner) if self.owner is not None else None
        self._header = self.request.headers.get(priority.HEADER)
        self.priority = priority.request_class(self._header, None, self._key_default)
        self.log["priority"] = self.priority

    def settle(self, admission: Admission, field: str | None, texts: int) -> None:
        """Once the body is read: its `priority` field, else (without a key default) the endpoint's
        default for this many texts (more than one: bulk) may change the class; a bulk place it cannot
        have is the same 503 as at admission. The header, when given, has decided already."""
        if self._header is not None:
            return
        settled = priority.request_class(None, field, self._key_default, priority.endpoint_default(texts))
        if settled != self.priority:
            admission.move(self.priority, settled, self.owner, self.screened)
            self.priority = settled
            self.log["priority"] = settled

    def caller(self, request_id: str | None = None) -> priority.Caller:
        """Whom the translation core's calls are for: this request (its class as settled, its key)."""
        return priority.Caller(request_id or self.id, self.priority, self.owner)

    async def bill(self, texts: Sequence[str]) -> None:
        """Before translating: a quota_exceeded ApiError if these characters take the key past its limit;
        else they are counted for the key once the answer is a success (Gate)."""
        count = sum(len(text) for text in texts)
        if self._usage is not None:
            await self._usage.check(self.owner, self.billed + count)
        self.billed += count
        self.log["characters"] = self.billed

    async def body(self) -> bytes:
        return await read_body(self.request, self._cfg.max_body_bytes)

    @property
    def grace_s(self) -> float:
        """What a deadline leaves work with answers in hand to give them (deadline.settled)."""
        return self._cfg.qa_retry_reserve_s

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """`work` under the request's deadline, cancelled if the client leaves.

        Not inside a streamed body: Starlette watches for the disconnect there and closes the stream.
        """
        return await guarded(self.request, work, self._cfg.request_timeout_s, self.grace_s, self.log)

    def note(self, outcome: Outcome) -> None:
        """Put what the translation core reports into the request's log line."""
        self.log.update(
            input_tokens=outcome.prompt_tokens,
            output_tokens=outcome.output_tokens,
            queue_ms=round(outcome.queue_s * 1000, 1),
            engine_ms=round(outcome.engine_s * 1000, 1),
            cached=all(outcome.cached),
        )
        self.log.update(outcome.verdicts.log())  # the answer checks' summary, as X-Hunyuan-QA says it

    def elapsed_ms(self) -> float:
        return (time.monotonic() - self.started) * 1000


Handler = Callable[[Call], Awaitable[Response]]


class Gate:
    """Runs an adapter's handler admitted, and answers, counts and logs every outcome the same way.

    A handler may return a StreamingResponse: the request then keeps its place, and its log line
    waits, until the last chunk is sent or the client leaves (logged as 499).
    """

    def __init__(
        self,
        admission: Admission,
        cfg: ReplicaConfig,
        metrics: Metrics,
        usage: Usage | None = None,
        key_defaults: Mapping[str, str] | None = None,
    ) -> None:
        self.admission = admission
        # Each key's default class (interactive or bulk) by key_id, from the keys file's priority=.
        self.key_defaults: Mapping[str, str] = key_defaults or {}
        self.cfg = cfg
        self.metrics = metrics
        self.usage = usage
        self.access = logging.getLogger(ACCESS_LOG)
        self._counts: set[asyncio.Task[None]] = set()

    async def serve(self, request: Request, handler: Handler) -> Response:
        """The handler's answer, admitted and counted; a refusal in the shape of the path's API."""
        render_error = renderer(request.url.path)
        call = Call(request, self.cfg, self.usage)
        try:
            call.classify(self.key_defaults)
            self.admission.enter(call.priority, call.owner, call.screened)
        except ApiError as err:
            refused = self._refused(call, err, render_error)
            self._record(call, refused.status_code)
            return refused
        # Not reset after: a streamed body reads it later in this request's own task (each request
        # runs in a task of its own, which took a copy of the context when it started).
        priority.KEY.set(call.owner)
        review.REQUEST.set(request)  # a retry's fusion sends the caller's key on (replica/review.py)
        memory = memory_use.begin()  # what the translation memory answered: X-Hunyuan-Memory, every API
        try:
            response = await self._run(call, handler, render_error)
            response.headers.update(memory.header())
            call.log.update(memory.log())
        except BaseException:  # cancelled (the server stopping): the place is given back all the same
            self._end(call, 500)
            raise
        if isinstance(response, StreamingResponse):
            return _Streamed(response, functools.partial(self._end_stream, call))
        if response.status_code < 400 and call.billed and self.usage is not None:
            await self.usage.add(call.owner, call.billed)  # before the answer: a usage read after it sees it
        self._end(call, response.status_code)
        return response

    def screen(self, scope: Scope, ahead: int) -> Response | None:
        """The refusal admission would give this request once the `ahead` before it are taken in
        (Admission.screen), asked before it waits in the intake; counted and logged as serve's are."""
        call = Call(Request(scope), self.cfg, self.usage)
        call.classify(self.key_defaults)
        refused = self.admission.screen(call.priority, call.owner, ahead)
        if refused is None:
            return None
        response = self._refused(call, refused, renderer(scope["path"]))
        self._record(call, response.status_code)
        return response

    def _end_stream(self, call: Call, status: int) -> None:
        if status < 400 and call.billed and self.usage is not None:
            task = asyncio.get_running_loop().create_task(self.usage.add(call.owner, call.billed))
            self._counts.add(task)  # held until done: the loop keeps only weak references to tasks
            task.add_done_callback(self._counts.discard)
        self._end(call, status)

    async def _run(self, call: Call, handler: Handler, render_error: ErrorRenderer) -> Response:
        try:
            return await handler(call)
        except ApiError as err:
            return self._refused(call, err, render_error)
        except ClientDisconnected:
            return Response(status_code=CLIENT_CLOSED)
        except Exception as err:
            fault = request_fault(err)
            if fault is not None:  # the input's fault: the same request fails on every replica
                logging.getLogger(__name__).info("request %s refused by the engine: %s", call.id, err)
                return self._refused(call, fault, render_error)
            # The engine failed, not the input: tell the balancer to go elsewhere.
            logging.getLogger(__name__).exception("engine error on %s", call.id)
            call.log["error"] = "engine_error"
            failed = f"engine failed: {type(err).__name__}"
            return render_error(ApiError(503, "engine_error", failed, self.admission.retry_after))

    def _refused(self, call: Call, err: ApiError, render_error: ErrorRenderer) -> Response:
        call.log["error"] = err.code
        if err.code in _REJECTION_REASONS:
            reason = _REJECTION_REASONS[err.code]
            self.metrics.rejections.labels(reason=reason).inc()
            self.metrics.class_rejections.labels(call.priority, reason).inc()
        return render_error(err)

    def _end(self, call: Call, status: int) -> None:
        if status < 400:
            self.admission.answered()
        self.admission.leave(call.priority, call.owner)
        self._record(call, status)

    def _record(self, call: Call, status: int) -> None:
        latency = time.monotonic() - call.started
        self.metrics.requests.labels(status=str(status)).inc()
        self.metrics.latency.observe(latency)
        self.metrics.class_latency.labels(call.priority).observe(latency)
        call.log.update(status=status, latency_ms=round(latency * 1000, 1))
        self.access.info(json.dumps(call.log, ensure_ascii=False))


class _Streamed(Response):
    """A StreamingResponse that reports, once, how it ended: its status when every chunk went out,
    499 when the client left first (Starlette then cancels the stream), 500 when the stream raised."""

    def __init__(self, inner: StreamingResponse, done: Callable[[int], None]) -> None:
        # No Response.__init__: this only forwards to `inner`, which holds status, headers and body.
        self.inner = inner
        self.status_code = inner.status_code
        self.background = None
        self._done = done
        self._ended = CLIENT_CLOSED

    async def _chunks(self, chunks: AsyncIterable[Any]) -> AsyncGenerator[Any, None]:
        try:
            async for chunk in chunks:
                yield chunk
            self._ended = self.inner.status_code
        except Exception:
            self._ended = 500
            raise
        finally:
            # The adapter's generator gets its GeneratorExit now (to abort its engine request).
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stream = self._chunks(self.inner.body_iterator)
        self.inner.body_iterator = stream
        try:
            await self.inner(scope, receive, send)
        finally:
            try:
                await stream.aclose()  # cancelled between two chunks, it would otherwise wait for the GC
            finally:
                self._done(self._ended)

"""Server-sent events that every dialect's streaming route shares: framing, headers, deadline, failures."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse

from hunyuan_serve.replica import deadline
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.engine.interface import Delta
from hunyuan_serve.replica.errors import ApiError, request_fault

# Nginx honours X-Accel-Buffering per response, so a stream leaves it at once without a location rule.
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(data: Any) -> str:
    """One `data:` event; JSON keeps newlines in the text out of the framing."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n"


def response(events: AsyncIterator[str], call: Call) -> StreamingResponse:
    return StreamingResponse(
        events, media_type="text/event-stream", headers={**SSE_HEADERS, "X-Request-ID": call.id}
    )


async def within(
    deltas: AsyncGenerator[Delta, None], call: Call, timeout_s: float
) -> AsyncGenerator[Delta, None]:
    """The deltas under the request's deadline; a deadline passed, an engine failure or an input the
    engine refuses ends them with an ApiError (504, 503, 400) that the adapter sends as its last event,
    its status already on the wire.

    Closing this iterator closes `deltas`, which aborts the engine request (the client left).
    """
    due = deadline.Deadline.after(timeout_s)
    async with contextlib.aclosing(deltas):
        try:
            while True:
                # Each step under the time left, not one timeout around the loop: that one would fire
                # wherever the consumer's task is, a send to the client included.
                try:
                    delta = await _step(deltas, due, call.grace_s)
                except StopAsyncIteration:
                    return
                yield delta
        except TimeoutError:
            call.log.update(error="deadline_exceeded", **due.missed)
            raise ApiError(
                504, "deadline_exceeded", f"no full answer within request_timeout_s={timeout_s:g} seconds"
            ) from None
        except (ApiError, asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as err:
            fault = request_fault(err)
            if fault is not None:  # the input's fault, found once the stream had started
                call.log["error"] = fault.code
                raise fault from None
            logging.getLogger(__name__).exception("engine error on %s", call.id)
            call.log["error"] = "engine_error"
            raise ApiError(503, "engine_error", f"engine failed: {type(err).__name__}") from None


async def _step(deltas: AsyncGenerator[Delta, None], due: deadline.Deadline, grace_s: float) -> Delta:
    """The next delta, in a task that carries the deadline (a long text's retry keeps to it), by the
    deadline or its grace (deadline.settled); TimeoutError past them, the step cancelled."""
    return await deadline.finished(due, _next(deltas), grace_s)


async def _next(deltas: AsyncGenerator[Delta, None]) -> Delta:
    return await anext(deltas)

"""A route's HTTP: its body read under a limit, its request id, its deadline, the client leaving."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

from fastapi import Request
from starlette.requests import ClientDisconnect

from hunyuan_serve.replica import deadline
from hunyuan_serve.replica.errors import ApiError

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
T = TypeVar("T")


class ClientDisconnected(Exception):
    """The client closed the connection before the answer was ready."""


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or a 413 as soon as it is over `limit` bytes (declared or streamed)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "body_too_large", f"body is {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, "body_too_large", f"body is over the limit of {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ClientDisconnected() from None
    return b"".join(chunks)


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def guarded(
    request: Request,
    work: Coroutine[Any, Any, T],
    timeout_s: float,
    grace_s: float = 0.0,
    log: dict[str, Any] | None = None,
) -> T:
    """Run `work` until done, the client leaves (ClientDisconnected) or the deadline passes (504).

    At the deadline, work with answers in hand (a retry under way) is told to stop and has `grace_s`
    more to give them (deadline.settled). A 504 says in `log` whether any answer was in hand.
    Call it once the body is read: the disconnect watch takes the request's remaining messages.
    """
    # The work's task carries its deadline: the answer checks' retry ends by it (replica/review.py).
    due = deadline.Deadline.after(timeout_s)
    task = deadline.started(due, work)
    watch = asyncio.ensure_future(_wait_disconnect(request))
    try:
        await deadline.settled({task, watch}, due, grace_s)
    finally:
        watch.cancel()
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    if watch.done() and not watch.cancelled():
        raise ClientDisconnected()
    if log is not None:
        log.update(due.missed)
    raise ApiError(504, "deadline_exceeded", f"no answer within request_timeout_s={timeout_s:g} seconds")


def request_id(request: Request) -> str:
    """The caller's X-Request-ID when it is a sane token, else a fresh one."""
    given = request.headers.get("x-request-id", "")
    return given if _REQUEST_ID.match(given) else uuid.uuid4().hex

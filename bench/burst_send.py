"""The burst's clients: K requests sent at once, each one's status and time, and their summary."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from bench.percentiles import nearest_rank

PROMPT = "Translate the following segment into Chinese, without additional explanation.\n\n{text}"


@dataclass(frozen=True)
class Burst:
    """One burst's outcome: statuses counted, latencies of the answered ones, the wall time."""

    side: str
    client: str
    k: int
    answered: int
    refused: int  # an HTTP status other than 200 (after the client's own retries, for openai)
    failed: int  # no status at all (a transport error, a timeout)
    p50_s: float
    p95_s: float
    max_s: float
    wall_s: float
    statuses: dict[str, int]


def summarize(side: str, client: str, outcomes: Sequence[tuple[str, float]], wall_s: float) -> Burst:
    """Each request's (status, seconds) as one Burst: '200' answered, another number refused, else failed."""
    statuses: dict[str, int] = {}
    for status, _ in outcomes:
        statuses[status] = statuses.get(status, 0) + 1
    times = [seconds for status, seconds in outcomes if status == "200"]
    refused = sum(n for status, n in statuses.items() if status.isdigit() and status != "200")
    failed = sum(n for status, n in statuses.items() if not status.isdigit())
    return Burst(
        side, client, len(outcomes), statuses.get("200", 0), refused, failed,
        nearest_rank(times, 0.5), nearest_rank(times, 0.95), max(times, default=0.0), wall_s, statuses,
    )  # fmt: skip


async def timed(send: Callable[[], Awaitable[str]]) -> tuple[str, float]:
    start = time.monotonic()
    try:
        status = await send()
    except Exception as err:  # counted, never raised: one failure must not lose the burst's figures
        status = type(err).__name__
    return status, time.monotonic() - start


async def script(
    url: str, body: Callable[[int], dict[str, Any]], k: int, key: str, sent: Callable[[], None] | None = None
) -> list[tuple[str, float]]:
    """The seeds' script: one httpx client, every request at once, no retries (no connection limit,
    no timeout short of the answer's). `sent` is called once all K have been written to their sockets."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    headers = {"Authorization": f"Bearer {key}"}
    written = 0

    async def trace(event: str, _: object) -> None:  # httpcore's trace extension
        nonlocal written
        if event == "http11.send_request_body.complete":
            written += 1
            if written == k and sent is not None:
                sent()

    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits, headers=headers) as http:

        async def one(i: int) -> str:
            answer = await http.post("/v1/completions", json=body(i), extensions={"trace": trace})
            return str(answer.status_code)

        return await asyncio.gather(*(timed(functools.partial(one, i)) for i in range(k)))


async def openai_burst(
    url: str, body: Callable[[int], dict[str, Any]], k: int, key: str
) -> list[tuple[str, float]]:
    """The official client with its defaults (its retries, timeout and connection pool)."""
    import openai

    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=key) as client:

        async def one(i: int) -> str:
            fields = body(i)
            extra = {
                name: fields.pop(name) for name in ("ignore_eos", "add_special_tokens") if name in fields
            }
            try:
                await client.completions.create(**fields, extra_body=extra or None)
            except openai.APIStatusError as err:
                return str(err.status_code)
            return "200"

        return await asyncio.gather(*(timed(functools.partial(one, i)) for i in range(k)))


def bodies(model: str, max_tokens: int, vllm: bool, round_: str) -> Callable[[int], dict[str, Any]]:
    """A distinct string per request (no answer from a cache): the completions body each side takes;
    vLLM ignores EOS through its own field, the stack's replicas through their test knob."""

    def body(i: int) -> dict[str, Any]:
        text = f"Item {i} of the {round_} burst: the settings are saved."
        fields = {
            "model": model,
            "prompt": PROMPT.format(text=text),
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        return {**fields, "ignore_eos": True, "add_special_tokens": False} if vllm else fields

    return body


def served(url: str, key: str) -> str:
    answer = httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    return str(answer.json()["data"][0]["id"])

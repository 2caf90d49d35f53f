"""OpenAI streaming through a server: time to first token (p50/p95) and tokens/s, with the official shapes."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class StreamFigures:
    """One setup's streamed chat completions: first-token times, tokens and failures."""

    requests: int
    failed: int
    ttft_p50_ms: float
    ttft_p95_ms: float
    tokens: int  # completion tokens, from each stream's usage chunk
    wall_s: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else 0.0

    def row(self, setup: str) -> str:
        return (
            f"| {setup} | {self.requests} | {self.failed} | {self.ttft_p50_ms:.0f} | {self.ttft_p95_ms:.0f} "
            f"| {self.tokens} | {self.tokens_per_s:.1f} |"
        )


HEADER = (
    "| setup | streams | failed | TTFT p50 ms | TTFT p95 ms | tokens | tokens/s |\n"
    "|---|---:|---:|---:|---:|---:|---:|"
)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; 0 for no values."""
    if not values:
        return 0.0
    if len(values) == 1:
        return float(values[0])
    return float(statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, round(q) - 1))])


async def _one(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> tuple[float | None, int]:
    """(seconds to the first content delta, completion tokens) of one stream; None when it failed."""
    started = time.monotonic()
    first: float | None = None
    tokens = 0
    async with client.stream("POST", url, json=body) as response:
        if response.status_code != 200:
            await response.aread()
            return None, 0
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data: "))
            if chunk.get("usage"):
                tokens = int(chunk["usage"].get("completion_tokens", 0))
            choices = chunk.get("choices") or []
            if first is None and choices and (choices[0].get("delta") or {}).get("content"):
                first = time.monotonic() - started
    return (first if first is not None else time.monotonic() - started), tokens


async def measure(
    base_url: str, bodies: Sequence[dict[str, Any]], concurrency: int, timeout_s: float = 300.0
) -> StreamFigures:
    """Each body as a streamed chat completion (stream fields added), `concurrency` at a time."""
    streamed = [{**body, "stream": True, "stream_options": {"include_usage": True}} for body in bodies]
    requests = len(streamed)
    url = base_url.rstrip("/") + "/v1/chat/completions"
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(timeout=timeout_s, limits=limits, trust_env=False) as client:

        async def run(body: dict[str, Any]) -> tuple[float | None, int]:
            async with gate:
                try:
                    return await _one(client, url, body)
                except httpx.HTTPError:
                    return None, 0

        started = time.monotonic()
        results = await asyncio.gather(*(run(body) for body in streamed))
        wall = time.monotonic() - started
    ttfts = [t * 1000 for t, _ in results if t is not None]
    return StreamFigures(
        requests=requests,
        failed=requests - len(ttfts),
        ttft_p50_ms=percentile(ttfts, 50),
        ttft_p95_ms=percentile(ttfts, 95),
        tokens=sum(tokens for _, tokens in results),
        wall_s=wall,
    )


def chat_body(model: str, prompt: str, sampling: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """One chat request as every setup gets it: the family's prompt as the user turn, its sampling."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        **sampling,
    }


def texts(count: int) -> list[str]:
    """Distinct sentences no other bench run sends, so the stack's cache answers none of them."""
    return [f"Stream check {index}: open the settings page and save the changes." for index in range(count)]

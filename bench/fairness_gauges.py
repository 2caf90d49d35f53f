"""The replicas' bulk width and queue gauges, read from their /metrics while a phase runs."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Sequence
from typing import TypeVar

import httpx

T = TypeVar("T")
METRICS_EVERY_S = 0.5
_GAUGE = re.compile(r"^(hunyuan_bulk_width|hunyuan_bulk_queued)\s+([0-9.eE+-]+)\s*$", re.MULTILINE)


async def _read(ports: Sequence[int], seen: dict[str, list[float]]) -> None:
    """The replicas' bulk width and queue, read from each one's /metrics every METRICS_EVERY_S."""
    async with httpx.AsyncClient(timeout=5, trust_env=False) as client:
        while True:
            for port in ports:
                try:
                    text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
                except httpx.HTTPError:
                    continue
                for name, value in _GAUGE.findall(text):
                    seen.setdefault(name, []).append(float(value))
            await asyncio.sleep(METRICS_EVERY_S)


async def during(ports: Sequence[int], work: Awaitable[T], seen: dict[str, list[float]]) -> T:
    """`work` awaited while the replicas' gauges are read into `seen` (by gauge name, every read); the
    reads stay in `seen` when `work` fails too."""
    reader = asyncio.create_task(_read(ports, seen))
    try:
        return await work
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


def quartiles(reads: Sequence[float]) -> tuple[float, float, float]:
    """The 1st, 2nd and 3rd quartiles of the reads (zeros when there are none)."""
    ordered = sorted(reads) or [0.0]
    q1, q2, q3 = (ordered[len(ordered) * k // 4] for k in (1, 2, 3))
    return q1, q2, q3

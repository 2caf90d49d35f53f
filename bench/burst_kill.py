"""The burst question's kill step: K strings at once while one of the two replicas gets kill -9."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import targets

# The victim is killed once it holds this share of the burst (admitted, in flight or waiting for
# engine room) and has work queued: the survivor then has to take what Nginx sends on of it.
HELD_SHARE = 0.25
HOLD_TIMEOUT_S = 120.0
POLL_S = 0.05


@dataclass(frozen=True)
class Killed:
    """What the victim held when it was killed, and when (seconds into the burst)."""

    pid: int
    in_flight: int
    queued: int
    at_s: float


async def _health(http: httpx.AsyncClient, addr: str) -> dict[str, Any]:
    try:
        answer = await http.get(f"http://{addr}/health", timeout=5)
        return dict(answer.json())
    except (httpx.HTTPError, ValueError):
        return {}


async def kill_when_holding(run_dir: Path, k: int, burst: asyncio.Future[Any]) -> Killed | None:
    """kill -9 of the stack's first replica once it holds HELD_SHARE of the K sent and has work queued;
    None when the burst ended (or HOLD_TIMEOUT_S passed) first, or no replica had a pid."""
    replicas = targets.stack_status(run_dir).get("replicas", [])
    victim = replicas[0] if replicas else {}
    pid, addr = int(victim.get("pid") or 0), str(victim.get("addr") or "")
    if pid <= 0 or not addr:
        return None
    start = time.monotonic()
    async with httpx.AsyncClient(trust_env=False) as http:
        while not burst.done() and time.monotonic() - start < HOLD_TIMEOUT_S:
            held = await _health(http, addr)
            in_flight, queued = int(held.get("in_flight", 0)), int(held.get("queued", 0))
            if in_flight >= k * HELD_SHARE and queued > 0:
                os.kill(pid, signal.SIGKILL)
                return Killed(pid, in_flight, queued, time.monotonic() - start)
            await asyncio.sleep(POLL_S)
    return None


def describe(killed: Killed | None, k: int) -> str:
    """The report's line about the kill."""
    if killed is None:
        return f"The kill step found no moment its replica held {HELD_SHARE:.0%} of the {k}: nothing killed."
    return (
        f"kill -9 of replica pid {killed.pid} {killed.at_s:.1f} s into the burst of {k}, holding "
        f"{killed.in_flight} requests admitted ({killed.queued} sequences waiting for engine room)."
    )

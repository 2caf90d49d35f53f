"""A person beside the burst, in a process of their own as a browser would be: one string at a time.

The burst's own client awaits thousands of answers in its event loop; a person timed from that loop
would count the client's lateness in reading them. So the person runs in a spawned process at the
refusal probe's priority (a client on another machine is not slowed by the bulk job's script), times
strings idle, then, once told to go, while the burst runs, until told to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event
from typing import Any

import httpx

from bench.fairness_stack import KEYS
from bench.refusal_probe import NICE

PROMPT = "Translate the following segment into Chinese, without additional explanation.\n\n{text}"
# How long the person waits for the burst to start, and for its last string once told to stop.
GO_TIMEOUT_S = 600.0
RESULT_TIMEOUT_S = 600.0


@dataclass
class Seen:
    """A person's answer times (s): idle, during the burst; their answers other than 200, by status."""

    idle: list[float] = field(default_factory=list)
    during: list[float] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)


async def one_at_a_time(
    url: str, model: str, max_tokens: int, until: Callable[[int], bool], refused: dict[str, int]
) -> list[float]:
    """A person's strings with the page's key, each sent when the last is answered, until `until(n)`;
    the statuses of answers other than 200 counted into `refused`."""
    times: list[float] = []
    headers = {"Authorization": f"Bearer {KEYS['page']}"}
    async with httpx.AsyncClient(base_url=url, timeout=600, headers=headers) as http:
        while not until(len(times)):
            text = f"Save {len(times) + sum(refused.values())}"
            body = {"model": model, "prompt": PROMPT.format(text=text), "max_tokens": max_tokens}
            start = time.monotonic()
            answer = await http.post("/v1/completions", json={**body, "temperature": 0})
            if answer.status_code == 200:
                times.append(time.monotonic() - start)
            else:
                refused[str(answer.status_code)] = refused.get(str(answer.status_code), 0) + 1
    return times


def _person(url: str, model: str, max_tokens: int, idle_n: int, go: Event, stop: Event, out: Any) -> None:
    """The child process: `idle_n` strings idle, then strings from `go` until `stop`; one Seen to `out`."""
    with contextlib.suppress(OSError):  # below 0 needs root; without it the person runs at its own
        os.nice(NICE)
    seen = Seen()
    seen.idle = asyncio.run(one_at_a_time(url, model, max_tokens, lambda n: n >= idle_n, {}))
    out.put(("idle", seen.idle))
    if go.wait(GO_TIMEOUT_S):
        seen.during = asyncio.run(
            one_at_a_time(url, model, max_tokens, lambda _: stop.is_set(), seen.refused)
        )
    out.put(("seen", seen))


class Person:
    """The running person: `idle()` waits for the idle times, `go()` and `stop()` bound the burst's
    strings, `seen()` returns them all."""

    def __init__(self, url: str, model: str, max_tokens: int, idle_n: int) -> None:
        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing of the parent's loop
        self._go, self._stop, self._out = ctx.Event(), ctx.Event(), ctx.Queue()
        args = (url, model, max_tokens, idle_n, self._go, self._stop, self._out)
        self._proc = ctx.Process(target=_person, args=args, daemon=True)
        self._proc.start()

    def idle(self) -> list[float]:
        kind, times = self._out.get(timeout=RESULT_TIMEOUT_S)
        assert kind == "idle", kind
        return list(times)

    def go(self) -> None:
        self._go.set()

    def stop(self) -> None:
        self._stop.set()

    def seen(self) -> Seen:
        kind, seen = self._out.get(timeout=RESULT_TIMEOUT_S)
        assert kind == "seen", kind
        return seen

    def close(self) -> None:
        self._go.set()
        self._stop.set()
        self._proc.join(30)
        if self._proc.is_alive():
            self._proc.kill()


@contextlib.contextmanager
def beside(url: str, model: str, max_tokens: int, idle_n: int) -> Iterator[Person]:
    """A person in their own process for the block's length (stopped, and reaped, when it ends)."""
    person = Person(url, model, max_tokens, idle_n)
    try:
        yield person
    finally:
        person.close()

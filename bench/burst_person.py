"""A person beside the burst, in a process of their own as a browser would be: one string at a time.

The burst's own client awaits thousands of answers in its event loop; a person timed from that loop
would count the client's lateness in reading them. So the person runs in a spawned process at the
refusal probe's priority (a client on another machine is not slowed by the bulk job's script), times
strings idle, then, once told to go, while the burst runs, until told to stop. The people-first
figure is the median of rounds of that, the bulk key's script at the stack's priority (and, with
--bulk-nice, its thread at another nice value).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event
from typing import Any

import httpx

from bench.burst_send import PROMPT, Burst, bodies, script, served, summarize
from bench.fairness_stack import KEYS
from bench.percentiles import nearest_rank
from bench.refusal_probe import NICE

PERSON_IDLE = 40  # a person's strings, one at a time, with nothing else sent
# A pause before them. One run once timed its idle strings at 0.09 s p50 right after the bursts, and
# later strings at 0.05-0.07 s; but 250 strings timed right after a 2,000 burst showed no settling-in
# (each 25 at 0.055-0.086 s, the machine's drift): the pause costs a few seconds and is kept as such.
PERSON_SETTLE_S = 5.0
# How long the person waits for the burst to start, and for its last string once told to stop.
GO_TIMEOUT_S = 600.0
RESULT_TIMEOUT_S = 600.0
# 1 where the kernel shares CPU time out by session before by nice value (autogroup, on by default in
# kernels built with it). `up` gives each replica a session of its own and Nginx makes its own, so a thread's
# nice value orders it only against its own session: the bulk script's against the bench's own person.
AUTOGROUP = "/proc/sys/kernel/sched_autogroup_enabled"


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


@dataclass(frozen=True)
class PersonRound:
    """One round of the people-first figure: a person's p50 idle, then during a burst of a bulk key
    (the bulk key's places are the replicas' less the interactive reserve), and that burst."""

    bulk_nice: int  # the bulk key's script's nice value in this round
    idle_p50_s: float
    during_p50_s: float
    during_count: int
    burst: Burst
    # The person's answers during the burst other than 200, by status: none are counted in the p50.
    during_refused: dict[str, int] = field(default_factory=dict)

    def ratio(self) -> float:
        return self.during_p50_s / self.idle_p50_s if self.idle_p50_s else 0.0


@dataclass(frozen=True)
class PeopleFirst:
    """The people-first figure over rounds: this machine's idle p50 moves by a quarter within seconds,
    as much as the target's margin, so one round's ratio says little alone."""

    k: int
    rounds: list[PersonRound]

    def nices(self) -> list[int]:
        return sorted({r.bulk_nice for r in self.rounds})

    def ratio(self, bulk_nice: int = 0) -> float:
        """The median of the ratios of the rounds with the bulk script at `bulk_nice`."""
        ratios = [r.ratio() for r in self.rounds if r.bulk_nice == bulk_nice]
        return statistics.median(ratios) if ratios else 0.0


def measure_round(url: str, model: str, args: argparse.Namespace, bulk_nice: int) -> PersonRound:
    """A person's strings idle, then from the moment the bulk key's client has written all of the
    largest K (before it, for seconds, the client is still connecting: strings then meet no burst) until
    its last answer. The bulk key's script runs on a thread at `bulk_nice` (Linux gives each thread its
    own nice value), the person in a process of their own."""
    k = max(args.k)
    time.sleep(PERSON_SETTLE_S)
    with beside(url, model, args.max_tokens, PERSON_IDLE) as person:
        person.idle()

        async def during() -> tuple[list[tuple[str, float]], float]:
            start = time.monotonic()
            body = bodies(model, args.max_tokens, False, f"bulk-{k}-{start}")
            outcomes = await script(url, body, k, KEYS["ci-a"], sent=person.go)
            person.stop()
            person.go()  # where a request failed before it was written: the person ends with no string
            return outcomes, time.monotonic() - start

        with ThreadPoolExecutor(1, initializer=os.setpriority, initargs=_nice(bulk_nice)) as thread:
            outcomes, wall_s = thread.submit(asyncio.run, during()).result()
        seen = person.seen()
    burst = summarize("stack", "script, bulk key", outcomes, wall_s)
    found = PersonRound(
        bulk_nice,
        nearest_rank(seen.idle, 0.5),
        nearest_rank(seen.during, 0.5),
        len(seen.during),
        burst,
        seen.refused,
    )
    print(
        f"[bench] burst person, bulk at nice {bulk_nice}: p50 {found.idle_p50_s:.2f} s idle, "
        f"{found.during_p50_s:.2f} s during "
        f"({', '.join(f'{t:.2f}' for t in seen.during)}; not 200: {seen.refused})",
        flush=True,
    )
    return found


def measure_person(url: str, args: argparse.Namespace) -> PeopleFirst:
    """The people-first figure: --person-rounds rounds on one stack, each with the bulk script at the
    stack's priority and at --bulk-nice (none where 0), in turn first."""
    model = served(url, KEYS["page"])
    nices = [0, args.bulk_nice] if args.bulk_nice else [0]
    rounds = []
    for n in range(args.person_rounds):
        for nice in nices if n % 2 == 0 else nices[::-1]:
            rounds.append(measure_round(url, model, args, nice))
    return PeopleFirst(max(args.k), rounds)


def sessions_grouped(path: str) -> bool:
    """Whether the kernel groups CPU time by session, read from `path` (AUTOGROUP); False where it
    cannot tell."""
    try:
        with open(path, encoding="ascii") as flag:
            return flag.read().strip() == "1"
    except OSError:
        return False


def _nice(value: int) -> tuple[int, int, int]:
    """setpriority's arguments for the calling thread (Linux: who 0 is the thread, not the process)."""
    return (os.PRIO_PROCESS, 0, value)


def person_lines(person: PeopleFirst) -> list[str]:
    """The people-first figure: the median of the rounds' ratios per nice value, then each round."""
    lines = [
        f"A person (the page's key, one string at a time) during a burst of {person.k} at once from a "
        "bulk key, against idle, p50, the median of the rounds:",
        "",
    ]
    for nice in person.nices():
        where = "the stack's own priority" if nice == 0 else "its thread's nice value"
        lines.append(f"- the bulk script at nice {nice} ({where}): {person.ratio(nice):.2f}x")
    if person.nices() != [0] and sessions_grouped(AUTOGROUP):
        lines += [
            "",
            "This kernel shares CPU time out by session first (autogroup), and the stack's replicas and "
            "Nginx each run in a session of their own: the script's nice value orders it against the "
            "bench's own person only, not against the stack.",
        ]
    lines.append("")
    for n, r in enumerate(person.rounds, 1):
        refused = f"; the person's answers other than 200: {r.during_refused}" if r.during_refused else ""
        lines.append(
            f"- round {n}, bulk at nice {r.bulk_nice}: p50 {r.idle_p50_s:.2f} s idle, "
            f"{r.during_p50_s:.2f} s ({r.ratio():.2f}x) over "
            f"{r.during_count} strings (that burst: {r.burst.statuses} in {r.burst.wall_s:.1f} s){refused}"
        )
    return lines

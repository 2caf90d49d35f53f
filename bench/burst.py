"""A burst sent all at once, as a user's script sends it, against the stack and vLLM's own server.

Two clients, each sending K strings at once and waiting for all: the seeds' script (one httpx client,
asyncio.gather, no retries) and the official `openai` client with its defaults (two retries, which
honour Retry-After). Both sides run on the same tiny model and the same cores, one after the other: `up
--replicas 2` and one `vllm serve`; each string costs max_tokens (EOS ignored on both). For each side,
client and K: answered, refused (any other status), p50 / p95 / max latency, wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import burst_person, targets
from bench.burst_kill import Killed, describe, kill_when_holding
from bench.burst_person import PROMPT
from bench.fairness_stack import KEYS, Stack, start_stack
from bench.procs import Server, free_port, running

RESULTS = Path(__file__).resolve().parent / "results"
CLIENTS = ("script", "openai")
SIDES = ("stack", "vllm")
PERSON_IDLE = 40  # a person's strings, one at a time, with nothing else sent
# A pause before them: right after the bursts before it, a run timed its idle strings at 0.09 s p50,
# and then its first strings of the burst phase, before the bulk reached the replicas, at 0.05-0.07 s.
PERSON_SETTLE_S = 5.0


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


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (share in (0, 1]); 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(share * len(ordered) + 0.999999) - 1))]


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
        percentile(times, 0.5), percentile(times, 0.95), max(times, default=0.0), wall_s, statuses,
    )  # fmt: skip


async def _timed(send: Callable[[], Awaitable[str]]) -> tuple[str, float]:
    start = time.monotonic()
    try:
        status = await send()
    except Exception as err:  # counted, never raised: one failure must not lose the burst's figures
        status = type(err).__name__
    return status, time.monotonic() - start


async def _script(
    url: str, body: Callable[[int], dict[str, Any]], k: int, key: str
) -> list[tuple[str, float]]:
    """The seeds' script: one httpx client, every request at once, no retries (no connection limit,
    no timeout short of the answer's)."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits, headers=headers) as http:

        async def one(i: int) -> str:
            return str((await http.post("/v1/completions", json=body(i))).status_code)

        return await asyncio.gather(*(_timed(functools.partial(one, i)) for i in range(k)))


async def _openai(
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

        return await asyncio.gather(*(_timed(functools.partial(one, i)) for i in range(k)))


def _bodies(model: str, max_tokens: int, vllm: bool, round_: str) -> Callable[[int], dict[str, Any]]:
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


def _served(url: str, key: str) -> str:
    answer = httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    return str(answer.json()["data"][0]["id"])


def measure_side(side: str, url: str, key: str, args: argparse.Namespace) -> list[Burst]:
    """Every client and K against one side, one burst at a time."""
    model = _served(url, key)
    found = []
    for k in args.k:
        for client in CLIENTS:
            body = _bodies(model, args.max_tokens, side == "vllm", f"{client}-{k}")
            run = _script if client == "script" else _openai
            start = time.monotonic()
            outcomes = asyncio.run(run(url, body, k, key))
            burst = summarize(side, client, outcomes, time.monotonic() - start)
            print(
                f"[bench] burst {side} {client} K={k}: {burst.statuses} in {burst.wall_s:.1f} s", flush=True
            )
            found.append(burst)
    return found


@dataclass(frozen=True)
class Person:
    """A person's strings, one at a time, idle and during a burst of a bulk key: their p50s, and the
    burst's statuses (the bulk key's places are the replicas' less the interactive reserve)."""

    k: int
    idle_p50_s: float
    during_p50_s: float
    during_count: int
    burst: Burst
    # The person's answers during the burst other than 200, by status: none are counted in the p50.
    during_refused: dict[str, int] = field(default_factory=dict)


def measure_person(url: str, args: argparse.Namespace) -> Person:
    """The people-first figure: a person's p50 alone, then while the largest K is sent by a bulk key; the
    person in a process of their own (bench/burst_person.py)."""
    model = _served(url, KEYS["page"])
    k = max(args.k)
    time.sleep(PERSON_SETTLE_S)
    with burst_person.beside(url, model, args.max_tokens, PERSON_IDLE) as person:
        person.idle()

        async def during() -> tuple[list[tuple[str, float]], float]:
            start = time.monotonic()
            body = _bodies(model, args.max_tokens, False, f"bulk-{k}")
            burst = asyncio.ensure_future(_script(url, body, k, KEYS["ci-a"]))
            await asyncio.sleep(1.0)  # the burst in the replicas' queues first: nothing to await for it
            person.go()
            outcomes = await burst
            person.stop()
            return outcomes, time.monotonic() - start

        outcomes, wall_s = asyncio.run(during())
        seen = person.seen()
    burst = summarize("stack", "script, bulk key", outcomes, wall_s)
    times = seen.during
    found = Person(k, percentile(seen.idle, 0.5), percentile(times, 0.5), len(times), burst, seen.refused)
    print(
        f"[bench] burst person: p50 {found.idle_p50_s:.2f} s idle, {found.during_p50_s:.2f} s during "
        f"({', '.join(f'{t:.2f}' for t in times)}; not 200: {seen.refused})",
        flush=True,
    )
    return found


def measure_kill(stack: Stack, args: argparse.Namespace) -> tuple[Burst, Killed | None]:
    """The script's burst of --kill-k while one of the two replicas gets kill -9 (bench/burst_kill.py)."""
    k = args.kill_k
    body = _bodies(_served(stack.base, KEYS["page"]), args.max_tokens, False, f"kill-{k}")

    async def burst_and_kill() -> tuple[Killed | None, list[tuple[str, float]], float]:
        start = time.monotonic()
        burst = asyncio.ensure_future(_script(stack.base, body, k, KEYS["page"]))
        killed = await kill_when_holding(stack.logs.parent, k, burst)
        return killed, await burst, time.monotonic() - start

    killed, outcomes, wall_s = asyncio.run(burst_and_kill())
    burst = summarize("stack", "script, kill -9", outcomes, wall_s)
    print(f"[bench] burst kill K={k}: {burst.statuses} in {wall_s:.1f} s; {describe(killed, k)}", flush=True)
    return burst, killed


def measure(args: argparse.Namespace, work: Path) -> tuple[list[Burst], Person | None, Killed | None]:
    """The stack (its kill step last), then vLLM's server (the stack stopped first: both use every
    core)."""
    from hunyuan_serve.tiny_model import build_tiny_model

    model = build_tiny_model(work / "tiny-hunyuan-mt")
    stack_args = argparse.Namespace(
        width_off=False, max_num_seqs=None, max_tokens=args.max_tokens, start_timeout_s=args.start_timeout_s
    )
    with contextlib.ExitStack() as started:
        stack = start_stack(started, work / "stack", model, stack_args, False)
        found = measure_side("stack", stack.base, KEYS["page"], args)
        person = measure_person(stack.base, args) if args.person else None
        killed = None
        if args.kill_k:
            burst, killed = measure_kill(stack, args)
            found.append(burst)
    if not args.vllm:
        return found, person, killed
    hw = targets.detect_hardware("cpu")
    port = free_port()
    vllm = Server(
        "vllm-openai", targets.vllm_argv(model, hw, port), work / "vllm.log", targets.baseline_env(hw)
    )
    with running(vllm):
        url = f"http://127.0.0.1:{port}"
        vllm.wait_http(f"{url}/v1/models", args.start_timeout_s)
        found += measure_side("vllm", url, "unused", args)
    return found, person, killed


def report(
    bursts: Sequence[Burst], args: argparse.Namespace, person: Person | None = None, kill: str = ""
) -> str:
    lines = [
        "# A burst at once: the stack against vLLM's own server",
        "",
        f"Two CPU replicas (`up --replicas 2`) and one `vllm serve` of the tiny model on the same cores, "
        f"{args.max_tokens} tokens an answer, distinct strings; K requests sent at once, then awaited.",
        "",
    ]
    for k in args.k:
        ratio = _ratio(bursts, k)
        lines.append(f"- K = {k}: stack wall time / vLLM's, the script: {ratio}")
    lines += [
        "",
        "| side | client | K | 200 | refused | failed | p50 s | p95 s | max s | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in bursts:
        row = f"| {b.side} | {b.client} | {b.k} | {b.answered} | {b.refused} | {b.failed} |"
        lines.append(f"{row} {b.p50_s:.2f} | {b.p95_s:.2f} | {b.max_s:.2f} | {b.wall_s:.1f} |")
    if person is not None:
        times = person.during_p50_s / person.idle_p50_s if person.idle_p50_s else 0.0
        lines += [
            "",
            f"A person (the page's key, one string at a time): p50 {person.idle_p50_s:.2f} s idle, "
            f"{person.during_p50_s:.2f} s ({times:.2f}x) over {person.during_count} strings while a bulk "
            f"key sent {person.k} at once (that burst: {person.burst.statuses} in "
            f"{person.burst.wall_s:.1f} s)"
            + (
                f"; the person's answers other than 200: {person.during_refused}."
                if person.during_refused
                else "."
            ),
        ]
    if kill:
        lines += ["", f"{kill} The row `script, kill -9` is that burst's outcome."]
    return "\n".join(lines) + "\n"


def _ratio(bursts: Sequence[Burst], k: int) -> str:
    walls = {b.side: b.wall_s for b in bursts if b.k == k and b.client == "script"}
    if "stack" not in walls or not walls.get("vllm"):
        return "n/a"
    return f"{walls['stack'] / walls['vllm']:.2f}x"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[600, 2000], help="Burst sizes.")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--start-timeout-s", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "report-burst.md")
    parser.add_argument(
        "--no-person", dest="person", action="store_false", help="Leave out the people-first figure."
    )
    parser.add_argument(
        "--kill-k",
        type=int,
        default=2000,
        help="A last burst of this many at once while one of the two replicas gets kill -9; 0: none.",
    )
    parser.add_argument(
        "--no-vllm", dest="vllm", action="store_false", help="The stack alone (no vLLM server side)."
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hs-burst-") as tmp:
        bursts, person, killed = measure(args, Path(tmp))
    text = report(bursts, args, person, describe(killed, args.kill_k) if args.kill_k else "")
    args.out.write_text(text, encoding="utf-8")
    figures = [asdict(b) for b in bursts] + ([{"person": asdict(person)}] if person else [])
    figures += [{"kill": asdict(killed)}] if killed else []
    args.out.with_suffix(".json").write_text(json.dumps(figures, indent=1), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Interactive requests during a bulk job, two keys' bulk jobs at once, and the job with the width off.

Two `up --replicas 2` stacks on CPU with the tiny model, started once and alike but for the bulk
width: the stack under test (the width on, unless --width-off) and one with replica.interactive_window_s
0 (the width always full); only one of them works at a time, so each has the machine's cores to
itself. vLLM's priority scheduling (engine.scheduling_policy priority, the default), a keys file of
three keys: `page` (a person in the page: one string every 0.2 s, interactive by default), `ci-a` and
`ci-b` (priority=bulk). The replicas' cache is off and EOS ignored, so every text costs max_tokens.
Four phases, each bounded in requests and seconds, run in rounds, each round in another order (none
always meets a machine another just warmed or a neighbour's load alone), each figure over all rounds:
1. idle: `page` alone; p50/p95;
2. bulk alone: `ci-a`'s job, as the translate CLI sends it (as many batches of 16 in flight as it
   keeps against this stack; each batch distinct texts or another target), texts/s;
3. bulk alone, width off: the same job on the other stack, right before or after 2 (the pair's order
   alternating by round), so that each round's on/off ratio compares neighbours in time;
4. bulk with interactive: the same job while `page` sends for as long as the job runs (its window and
   its last batches); the person's latencies count the strings sent within the window;
then two keys: `ci-a` and `ci-b` each run that job at once; each key's share of the texts/s. Beside
each phase, the replicas' bulk width (hunyuan_bulk_width, its narrowest) and the bulk waiting in them
(hunyuan_bulk_queued, its most), read from their /metrics twice a second.
Targets: interactive p50/p95 within 1.5x of idle, bulk at least 0.6x alone with a person, the job
alone with the width on at least 0.9x the job with it off, each key at least 40%.
`make bench Q=people-first` runs it; alone: `python -m bench.fairness [--seconds 20]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # `python bench/fairness.py` as well as `python -m bench.fairness`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ensemble import strings
from bench.fairness_gauges import during, quartiles
from bench.fairness_report import Figures, Job, Width, latencies, merged, ratio, report
from bench.fairness_stack import KEYS, Stack, start_stack
from bench.fairness_where import Trace, access_lines, split
from bench.names import STACK_TARGETS
from bench.procs import REPO
from hunyuan_serve.client.settings import ClientSettings
from hunyuan_serve.client.width import BULK_TEXTS_HEADER, parse_bulk_texts, requests_in_flight
from hunyuan_serve.config import ReplicaConfig

RESULTS = REPO / "bench" / "results"
PHASES = ("idle", "alone", "beside")  # on the stack under test; "off" goes beside "alone" (round_order)
# The job's target languages: the workload's ~5,500 strings into each of these are more distinct prompts
# than a run's job phases send (about 47,000 texts at 330 texts/s), so none meets vLLM's prefix cache.
JOB_TARGETS = (*STACK_TARGETS, "pt", "it", "tr", "vi")


# -- the measuring (a real stack) ---------------------------------------------------------------


def _client(base: str, key: str, connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    headers = {"Authorization": f"Bearer {KEYS[key]}"}
    return httpx.AsyncClient(base_url=base, headers=headers, timeout=300, limits=limits, trust_env=False)


async def _interactive(
    base: str,
    texts: list[str],
    going: Callable[[], bool],
    every_s: float = 0.0,
    counted_until: float = math.inf,
    traces: list[Trace] | None = None,
) -> tuple[list[float], int]:
    """`page`'s strings one at a time, the next `every_s` after the last was sent (or when it is
    answered, if later), while `going()` holds and strings are left: the latencies of those sent
    before `counted_until`, and how many of those failed; each counted one's latency and request id
    go into `traces` too."""
    samples: list[float] = []
    failed = 0
    async with _client(base, "page", 1) as client:
        for text in texts:
            if not going():
                break
            t0, sent = time.perf_counter(), time.monotonic()
            try:
                answer = await client.post(
                    "/translate", json={"text": text, "source_lang": "en", "target_lang": "zh"}
                )
                ok = answer.status_code == 200
            except httpx.HTTPError:
                ok = False
            if sent < counted_until and ok:
                samples.append((time.perf_counter() - t0) * 1000)
                if traces is not None:
                    traces.append((samples[-1], str(answer.json().get("request_id", ""))))
            elif sent < counted_until:
                failed += 1
            await asyncio.sleep(max(0.0, every_s - (time.perf_counter() - t0)))
    return samples, failed


def _before(until: float) -> Callable[[], bool]:
    return lambda: time.monotonic() < until


async def _watched(ports: Sequence[int], widths: dict[str, Width], phase: str, work: Any) -> Any:
    """`work` awaited while the replicas' gauges are read; what they read lands in widths[phase]."""
    seen: dict[str, list[float]] = {}
    try:
        return await during(ports, work, seen)
    finally:
        narrow = min(seen.get("hunyuan_bulk_width", [0.0]))
        queued = max(seen.get("hunyuan_bulk_queued", [0.0]))
        read = list(quartiles(seen.get("hunyuan_bulk_width", [])))  # the narrowest alone hides a swing
        print(f"[bench] {phase}: width quartiles {read}", flush=True)
        old = widths.get(phase)
        if old is not None:
            narrow, queued = min(narrow, old.narrowest), max(queued, old.most_queued)
        widths[phase] = Width(int(narrow), int(queued))


async def _translate_width(base: str, batch: int) -> int:
    """The batches `translate` keeps in flight against this stack: sized from the X-Hunyuan-Bulk-Texts
    of an answer, as the client sizes it (client/width.py)."""
    async with _client(base, "ci-a", 1) as client:
        body = {"text": "Save", "source_lang": "en", "target_lang": "zh"}
        answer = await client.post("/translate", json=body)
    settings = ClientSettings(batch_size=batch)
    return requests_in_flight(settings, parse_bulk_texts(answer.headers.get(BULK_TEXTS_HEADER)))


def batch_bodies(texts: Sequence[str], batch: int) -> Iterator[dict[str, Any]]:
    """Bulk batches none of which repeats a prompt of another before texts x targets run out: each pass
    over the texts goes into the next target language. A repeated batch would measure the replica's
    coalescing of identical texts in flight (and vLLM's prefix cache), not the engine's work."""
    for target in itertools.cycle(JOB_TARGETS):
        for start in range(0, len(texts) - batch + 1, batch):
            yield {"texts": list(texts[start : start + batch]), "source_lang": "en", "target_lang": target}


async def _job(
    base: str, key: str, bodies: Iterator[dict[str, Any]], args: argparse.Namespace, until: float
) -> Job:
    """`key`'s bulk job: `concurrency` workers each sending the next batch of `bodies` (shared by every
    job of the run) until `until`; a 503 waits a little and sends the same batch again."""
    counts = {"texts": 0, "refused": 0, "failed": 0}

    async def worker(client: httpx.AsyncClient) -> None:
        body = next(bodies)
        while time.monotonic() < until:
            try:
                answer = await client.post("/translate", json=body, headers={"X-Priority": "bulk"})
                status = answer.status_code
            except httpx.HTTPError:
                status = 0
            if status == 503:  # refused: the same batch again after a pause
                counts["refused"] += 1
                await asyncio.sleep(args.refused_pause_s)
                continue
            if status == 200:
                counts["texts"] += len(body["texts"])
            else:
                counts["failed"] += 1
            body = next(bodies)  # answered or failed for good: the next batch

    t0 = time.monotonic()
    async with _client(base, key, args.concurrency) as client:
        await asyncio.gather(*(worker(client) for _ in range(args.concurrency)))
    return Job(key, counts["texts"], round(time.monotonic() - t0, 3), counts["refused"], counts["failed"])


def phase_order(n: int) -> list[str]:
    """Round n's three phases on the stack under test, rotated by n so that none always runs first."""
    return list(PHASES[n % 3 :] + PHASES[: n % 3])


def round_order(n: int) -> list[str]:
    """Round n's phases: phase_order(n), and the job on the stack with the width off right beside the
    job alone, after it in even rounds and before it in odd ones."""
    order = phase_order(n)
    at = order.index("alone")
    order[at : at + 1] = ["alone", "off"] if n % 2 == 0 else ["off", "alone"]
    return order


async def _beside(
    stack: Stack, args: argparse.Namespace, bodies: Iterator[dict[str, Any]], texts: list[str], until: float
) -> tuple[Job, tuple[list[float], int]]:
    """The job over its window and `page` beside it for as long as the job runs, its last batches
    included, so that the width is a person's to its end (bounded by `texts` and a second window). The
    person's figures are the strings sent within the window, while the job was at its full pace."""
    job = asyncio.create_task(_job(stack.base, "ci-a", bodies, args, until))
    hard = until + args.seconds

    def going() -> bool:
        return not job.done() and time.monotonic() < hard

    person = await _interactive(
        stack.base, texts, going, args.interactive_every_s, counted_until=until, traces=args.traces["beside"]
    )
    return await job, person


async def _phase(
    kind: str,
    stacks: dict[str, Stack],
    args: argparse.Namespace,
    bodies: Iterator[dict[str, Any]],
    texts: list[str],
) -> Any:
    """One phase on its stack, the replicas' gauges read meanwhile: what it measured."""
    if kind in ("alone", "off"):  # the job alone: the last person's window passes first, on both alike
        await asyncio.sleep(args.window_s)
    stack = stacks["off" if kind == "off" else "on"]
    until = time.monotonic() + args.seconds
    if kind == "idle":
        work: Any = _interactive(
            stack.base, texts, _before(until), args.interactive_every_s, traces=args.traces["idle"]
        )
    elif kind == "beside":
        work = _beside(stack, args, bodies, texts, until)
    else:
        work = _job(stack.base, "ci-a", bodies, args, until)
    return await _watched(stack.ports, args.widths, kind, work)


async def _round(
    stacks: dict[str, Stack],
    args: argparse.Namespace,
    bodies: Iterator[dict[str, Any]],
    people: list[str],
    n: int,
) -> dict[str, Any]:
    """One round of the four phases, in the order of round n (round_order): what each measured."""
    out: dict[str, Any] = {}
    for kind in round_order(n):
        mine = people[(2 * n + (kind == "beside")) * args.interactive :][: args.interactive]
        out[kind] = await _phase(kind, stacks, args, bodies, mine)
    return out


async def _alternating(
    stacks: dict[str, Stack], args: argparse.Namespace, bodies: Iterator[dict[str, Any]], people: list[str]
) -> Figures:
    """Rounds of the person alone, the job alone with the width on and off, and both together, each
    round in another order; figures over all rounds."""
    jobs: dict[str, list[Job]] = {"alone": [], "off": [], "beside": []}
    idle: list[float] = []
    busy: list[float] = []
    failed = {"idle": 0, "busy": 0}
    for n in range(args.rounds):
        got = await _round(stacks, args, bodies, people, n)
        done, (times, missed) = got["beside"]
        jobs["alone"].append(got["alone"])
        jobs["off"].append(got["off"])
        jobs["beside"].append(done)
        busy += times
        failed["busy"] += missed
        idle += got["idle"][0]
        failed["idle"] += got["idle"][1]
        print(f"[bench] fairness round {n + 1}: alone {got['alone'].per_s:.1f} texts/s, width off "
              f"{got['off'].per_s:.1f}, with interactive {done.per_s:.1f}", flush=True)  # fmt: skip
    alone, off, beside = jobs["alone"], jobs["off"], jobs["beside"]
    return Figures(
        latencies(idle, failed["idle"]),
        merged(alone),
        latencies(busy, failed["busy"]),
        merged(beside),
        (alone[0], alone[0]),
        tuple(round(ratio(b.per_s, a.per_s), 3) for a, b in zip(alone, beside, strict=True)),
        off=merged(off),
        off_ratios=tuple(round(ratio(a.per_s, o.per_s), 3) for a, o in zip(alone, off, strict=True)),
    )


async def _phases(stacks: dict[str, Stack], args: argparse.Namespace) -> Figures:
    # Distinct strings per phase: vLLM's prefix cache would make a string sent before cheaper.
    n = args.interactive * 2 * args.rounds
    texts = strings(10_000, 0)  # all the workload's distinct strings (about 5,500)
    people, warm = texts[:n], texts[n : n + 4]
    job = batch_bodies(texts[n + 4 :], args.batch)
    for stack in stacks.values():  # warm-up, uncounted
        await _interactive(stack.base, warm, _before(time.monotonic() + args.seconds))
    if args.concurrency is None:  # what `translate` itself would hold; the report says which
        args.concurrency = await _translate_width(stacks["on"].base, args.batch)
        args.width_from = "as `translate` sizes it from the stack's X-Hunyuan-Bulk-Texts"
    start_load = os.getloadavg()[0]
    rounds = await _alternating(stacks, args, job, people)
    access = access_lines(stacks["on"].logs)
    where = {phase: split(traces, access) for phase, traces in args.traces.items()}
    print(f"[bench] fairness, where the person's time goes: {where}", flush=True)
    print(
        f"[bench] fairness idle {rounds.idle}, with the job {rounds.busy}; bulk {rounds.round_ratios}x "
        f"alone; alone, width on / off {rounds.off_ratios}x"
    )
    until = time.monotonic() + args.seconds
    on = stacks["on"]
    both = asyncio.gather(_job(on.base, "ci-a", job, args, until), _job(on.base, "ci-b", job, args, until))
    pair = await _watched(on.ports, args.widths, "pair", both)
    print(f"[bench] fairness two keys: {pair[0].per_s:.1f} / {pair[1].per_s:.1f} texts/s", flush=True)
    load = (start_load, os.getloadavg()[0])
    return replace(rounds, pair=(pair[0], pair[1]), widths=dict(args.widths), load=load, where=where)


def measure(args: argparse.Namespace, work: Path) -> Figures:
    """Both stacks started once, one after the other (so neither starts while the other measures), and
    the phases run on them; both stop at the end."""
    from hunyuan_serve.tiny_model import build_tiny_model

    model = build_tiny_model(work / "tiny-hunyuan-mt")
    with contextlib.ExitStack() as started:
        stacks = {
            "on": start_stack(started, work / "on", model, args, args.width_off),
            "off": start_stack(started, work / "off", model, args, True),
        }
        return asyncio.run(_phases(stacks, args))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="Longest window of each phase.")
    parser.add_argument(
        "--interactive",
        type=int,
        help="Most one-string requests per phase (default: as many as the person's pace fits in two "
        "windows, so that the person outlasts the job's window and its last batches).",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        help="Bulk batches in flight per key (default: as many as `translate` keeps against this stack).",
    )
    parser.add_argument("--batch", type=int, default=16, help="Texts per bulk batch.")
    parser.add_argument(
        "--interactive-every-s", type=float, default=0.2, help="A person's pace: one string this often."
    )
    parser.add_argument("--rounds", type=int, default=2, help="Rounds of the four phases.")
    parser.add_argument(
        "--max-num-seqs", type=int, help="The replicas' engine.max_num_seqs (default: the engine's default)."
    )
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument(
        "--width-off",
        action="store_true",
        help="replica.interactive_window_s 0 on the stack under test too: the bulk width always full, as "
        "before the replicas had one (the job alone, width off, runs on a second stack either way).",
    )
    parser.add_argument("--refused-pause-s", type=float, default=0.2, help="A refused batch's wait.")
    parser.add_argument("--start-timeout-s", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "report-fairness.md")
    args = parser.parse_args(argv)
    args.width_from = "--concurrency"  # the report's word for where the width came from
    args.widths = {}  # per phase, the replicas' bulk width as their /metrics said (_watched)
    args.traces = {"idle": [], "beside": []}  # per phase, the person's (latency, request id) (_interactive)
    if args.interactive is None and args.interactive_every_s <= 0:
        parser.error("--interactive-every-s 0 (as fast as answered) needs --interactive: a bound")
    if args.interactive is None:
        args.interactive = math.ceil(2 * args.seconds / args.interactive_every_s)
    # How long a person counts as active: the job alone starts once the last one's window has passed
    # (on the stack with the width off too, so that both jobs alone start after the same pause).
    args.window_s = ReplicaConfig().interactive_window_s + 0.5
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hs-fairness-") as tmp:
        figures = measure(args, Path(tmp))
    text = report(figures, args)
    args.out.write_text(text, encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(asdict(figures), indent=1), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

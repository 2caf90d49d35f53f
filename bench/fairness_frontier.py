"""The people-first frontier: at each bulk width held while a person is active, the person and the job.

python -m bench.fairness_frontier [--widths 0,1,2,4,8,16,32] [--rounds 1]

The width rule (replica/admission/bulk_width.py) learns the bulk a person's steps may carry from their
pace; this asks what each width gives at all on this machine. For each width N, a stack of two CPU
replicas runs with replica.bulk_width_min N and interactive_step_ratio just over 1, so that while a
person is active the steps that carry their strings carry N bulk sequences (but for the rule's probes,
at 0; the widths the replicas' /metrics read are reported beside each row). Each round runs the person
alone, the job alone and both together, each round in another order, as the people-first question does
(bench/fairness.py, whose phases this reuses).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.ask import RESULTS
from bench.ensemble import strings
from bench.fairness import _before, _beside, _interactive, _job, _translate_width, batch_bodies, phase_order
from bench.fairness_gauges import during, quartiles
from bench.fairness_report import (
    BULK_RATIO_MIN,
    LATENCY_RATIO_MAX,
    Job,
    Latencies,
    latencies,
    merged,
    ratio,
)
from bench.fairness_stack import Stack, start_stack
from hunyuan_serve.config import ReplicaConfig

# Just over the ratio's lower bound (it must be > 1): any pace beside bulk slower than the person's
# alone halves the width, which so stays at its floor.
FLOOR_RATIO = 1.0001


@dataclass(frozen=True)
class Point:
    """One width's figures over its rounds: the person idle and beside the job, the job alone and
    beside the person, and the quartiles of the bulk width the replicas read while both ran."""

    width: int
    idle: Latencies
    busy: Latencies
    alone: Job
    beside: Job
    read: tuple[float, float, float]

    @property
    def p50_ratio(self) -> float:
        return ratio(self.busy.p50_ms, self.idle.p50_ms)

    @property
    def p95_ratio(self) -> float:
        return ratio(self.busy.p95_ms, self.idle.p95_ms)

    @property
    def job_ratio(self) -> float:
        return ratio(self.beside.per_s, self.alone.per_s)

    def meets(self) -> bool:
        person = max(self.p50_ratio, self.p95_ratio) <= LATENCY_RATIO_MAX
        return person and self.job_ratio >= BULK_RATIO_MIN


def point(width: int, got: Sequence[dict[str, Any]], reads: Sequence[float]) -> Point:
    """One width's Point from its rounds' phases: idle and busy are (latencies, failed) pairs."""
    idle = [ms for r in got for ms in r["idle"][0]]
    busy = [ms for r in got for ms in r["busy"][0]]
    return Point(
        width,
        latencies(idle, sum(r["idle"][1] for r in got)),
        latencies(busy, sum(r["busy"][1] for r in got)),
        merged([r["alone"] for r in got]),
        merged([r["beside"] for r in got]),
        quartiles(reads),
    )


def report(points: Sequence[Point], args: argparse.Namespace) -> str:
    """The frontier as Markdown: one row per width, then which widths meet both targets."""
    rows = [
        "| width while a person is active | width read (quartiles) | person p50 ms idle / beside | p50 | p95 "
        "| job texts/s alone / beside | job | both targets |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        read = " / ".join(f"{q:g}" for q in p.read)
        rows.append(
            f"| {p.width} | {read} | {p.idle.p50_ms:.0f} / {p.busy.p50_ms:.0f} | {p.p50_ratio:.2f}x "
            f"| {p.p95_ratio:.2f}x | {p.alone.per_s:.0f} / {p.beside.per_s:.0f} | {p.job_ratio:.2f}x "
            f"| {'yes' if p.meets() else 'no'} |"
        )
    meeting = [str(p.width) for p in points if p.meets()]
    verdict = ", ".join(meeting) if meeting else "none"
    return "\n".join(
        [
            f"`up --replicas 2` (CPU, tiny model, cache off, EOS ignored, max_tokens {args.max_tokens}); "
            f"a job of {args.concurrency} batches of {args.batch} texts in flight, X-Priority: bulk; "
            f"a person sends one string every {args.interactive_every_s} s through Nginx; each phase "
            f"{args.seconds:g} s at most; {args.rounds} round(s) of the three phases per width, each "
            "round in another order; one stack per width (replica.bulk_width_min N, interactive_step_ratio "
            f"{FLOOR_RATIO}). Client on the same cores.",
            "",
            *rows,
            "",
            f"Widths meeting both person p50 and p95 <= {LATENCY_RATIO_MAX}x idle and job >= "
            f"{BULK_RATIO_MIN}x alone: **{verdict}**.",
            "",
            f"Re-run: `python -m bench.fairness_frontier --widths {','.join(str(w) for w in args.widths)} "
            f"--rounds {args.rounds} --seconds {args.seconds:g}`.",
        ]
    )


async def _phase(
    kind: str, stack: Stack, args: argparse.Namespace, job: Iterator[Any], mine: list[str]
) -> Any:
    """One phase on the stack: the person's (latencies, failed), or the job, or both (beside)."""
    until = time.monotonic() + args.seconds
    if kind == "idle":
        return await _interactive(stack.base, mine, _before(until), args.interactive_every_s)
    if kind == "alone":
        return await _job(stack.base, "ci-a", job, args, until)
    return await _beside(stack, args, job, mine, until)


async def _rounds(stack: Stack, args: argparse.Namespace, texts: list[str], width: int) -> Point:
    """The rounds on one width's stack, the replicas' width read while the person and the job ran."""
    people, warm = texts[: args.people], texts[args.people : args.people + 4]
    job = batch_bodies(texts[args.people + 4 :], args.batch)
    await _interactive(stack.base, warm, _before(time.monotonic() + args.seconds))
    if args.concurrency is None:
        args.concurrency = await _translate_width(stack.base, args.batch)
    got: list[dict[str, Any]] = []
    reads: list[float] = []
    for n in range(args.rounds):
        out: dict[str, Any] = {}
        for i, kind in enumerate(phase_order(n)):
            await asyncio.sleep(args.window_s)  # the last person's window passes: each phase starts alike
            mine = people[(3 * n + i) * args.interactive :][: args.interactive]
            seen: dict[str, list[float]] = {}
            out[kind] = await during(stack.ports, _phase(kind, stack, args, job, mine), seen)
            if kind == "beside":
                reads += seen.get("hunyuan_bulk_width", [])
        out["beside"], out["busy"] = out["beside"]
        got.append(out)
    found = point(width, got, reads)
    print(f"[bench] frontier width {width}: {found}", flush=True)
    return found


def measure(args: argparse.Namespace, work: Path) -> list[Point]:
    """One stack per width, started when the last one has stopped, so that only one works at a time."""
    from hunyuan_serve.tiny_model import build_tiny_model

    model = build_tiny_model(work / "tiny-hunyuan-mt")
    texts = strings(10_000, 0)  # distinct strings, so that vLLM's prefix cache makes none cheaper
    points = []
    for width in args.widths:
        replica = {"bulk_width_min": width, "interactive_step_ratio": FLOOR_RATIO}
        with contextlib.ExitStack() as started:
            stack = start_stack(started, work / f"width-{width}", model, args, False, replica)
            points.append(asyncio.run(_rounds(stack, args, texts, width)))
    return points


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--widths", default="0,1,2,4,8,16,32", help="The widths, comma-separated.")
    parser.add_argument("--seconds", type=float, default=12.0, help="Longest window of each phase.")
    parser.add_argument("--rounds", type=int, default=1, help="Rounds of the three phases per width.")
    parser.add_argument("--concurrency", type=int, help="Bulk batches in flight (default: as `translate`).")
    parser.add_argument("--batch", type=int, default=16, help="Texts per bulk batch.")
    parser.add_argument("--interactive-every-s", type=float, default=0.2, help="One string this often.")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--refused-pause-s", type=float, default=0.2, help="A refused batch's wait.")
    parser.add_argument("--start-timeout-s", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "report-frontier.md")
    args = parser.parse_args(argv)
    args.widths = [int(w) for w in args.widths.split(",")]
    if not args.widths or min(args.widths) < 0 or args.interactive_every_s <= 0:
        parser.error("--widths needs widths of 0 or more, and --interactive-every-s a pace over 0")
    args.interactive = math.ceil(2 * args.seconds / args.interactive_every_s)
    args.people = args.interactive * 3 * args.rounds
    args.window_s = ReplicaConfig().interactive_window_s + 0.5
    args.width_off, args.max_num_seqs = False, None  # stack_config's fields: the width on, vLLM's batch
    args.traces = {"idle": [], "beside": []}  # bench.fairness._beside keeps the person's request ids here
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hs-frontier-") as tmp:
        points = measure(args, Path(tmp))
    text = report(points, args)
    args.out.write_text(text, encoding="utf-8")
    figures = [{**asdict(p), "p50_ratio": p.p50_ratio, "job_ratio": p.job_ratio} for p in points]
    args.out.with_suffix(".json").write_text(json.dumps(figures, indent=1), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

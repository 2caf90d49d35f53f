"""The fairness row's figures and report: phases, ratios, the targets' verdicts, the Markdown (pure)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.fairness_where import Split, where_lines
from bench.percentiles import nearest_rank

# What the priority classes must reach.
LATENCY_RATIO_MAX = 1.5
BULK_RATIO_MIN = 0.6  # the job beside a person sending a string every 0.2 s, against the job alone
WIDTH_COST_MIN = 0.9  # the job alone with the width on, against the job alone with it off
KEY_SHARE_MIN = 0.4


@dataclass(frozen=True)
class Latencies:
    """One-at-a-time requests of `page`: how many were answered, their p50/p95, how many failed."""

    answered: int
    p50_ms: float
    p95_ms: float
    failed: int


@dataclass(frozen=True)
class Job:
    """One key's bulk job over a window: texts answered, the window, batches refused (503) or failed."""

    key: str
    texts: int
    wall_s: float
    refused: int
    failed: int

    @property
    def per_s(self) -> float:
        return self.texts / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class Width:
    """The replicas' bulk width over a phase: its narrowest, and the most bulk waiting in a replica."""

    narrowest: int
    most_queued: int


@dataclass(frozen=True)
class Figures:
    idle: Latencies
    alone: Job
    busy: Latencies  # `page` during the bulk job
    beside: Job  # the bulk job while `page` sent
    pair: tuple[Job, Job]  # the two keys at once
    round_ratios: tuple[float, ...] = ()  # each round's bulk texts/s with interactive / alone
    widths: dict[str, Width] | None = None  # per phase (idle, alone, beside, pair)
    load: tuple[float, float] = (0.0, 0.0)  # the machine's 1-minute load average at the start and end
    off: Job | None = None  # the job alone on the stack with the width off (interactive_window_s 0)
    off_ratios: tuple[float, ...] = ()  # each round's job alone, width on / width off
    where: dict[str, Split] | None = None  # the person's time by part, idle and beside the job


def latencies(samples: Sequence[float], failed: int) -> Latencies:
    return Latencies(
        len(samples), round(nearest_rank(samples, 0.5), 1), round(nearest_rank(samples, 0.95), 1), failed
    )


def merged(jobs: Sequence[Job]) -> Job:
    """Several windows of one key's job as one: their texts, seconds and refusals added."""
    return Job(
        jobs[0].key,
        sum(j.texts for j in jobs),
        round(sum(j.wall_s for j in jobs), 3),
        sum(j.refused for j in jobs),
        sum(j.failed for j in jobs),
    )


def ratio(value: float, base: float) -> float:
    """value / base, 0 when there is no base (a phase that answered nothing)."""
    return value / base if base > 0 else 0.0


def shares(jobs: Sequence[Job]) -> list[float]:
    """Each job's share of the texts all of them answered (0 each when none answered)."""
    total = sum(j.texts for j in jobs)
    return [ratio(j.texts, total) for j in jobs]


def verdicts(f: Figures) -> list[tuple[str, float, str, bool]]:
    """(what, measured, target, met) for each target the people-first question sets."""
    p50, p95 = ratio(f.busy.p50_ms, f.idle.p50_ms), ratio(f.busy.p95_ms, f.idle.p95_ms)
    bulk = ratio(f.beside.per_s, f.alone.per_s)
    rows = [
        ("interactive p50, during the job / idle", p50, f"<= {LATENCY_RATIO_MAX}x", p50 <= LATENCY_RATIO_MAX),
        ("interactive p95, during the job / idle", p95, f"<= {LATENCY_RATIO_MAX}x", p95 <= LATENCY_RATIO_MAX),
        ("bulk texts/s, with interactive / alone", bulk, f">= {BULK_RATIO_MIN}x", bulk >= BULK_RATIO_MIN),
    ]
    if f.off is not None:
        cost = ratio(f.alone.per_s, f.off.per_s)
        rows.append(
            ("job alone, width on / width off", cost, f">= {WIDTH_COST_MIN}x", cost >= WIDTH_COST_MIN)
        )
    held = (f.widths or {}).get("alone")
    if held is not None:
        rows.append(
            ("bulk waiting in a replica, job alone", float(held.most_queued), "0", held.most_queued == 0)
        )
    for job, share in zip(f.pair, shares(f.pair), strict=True):
        rows.append(
            (
                f"{job.key}'s share of two keys' texts/s",
                share,
                f">= {KEY_SHARE_MIN:.0%}",
                share >= KEY_SHARE_MIN,
            )
        )
    return rows


def report(f: Figures, args: argparse.Namespace) -> str:
    """The Markdown report: the setup, every phase's figures, and each target met or not."""
    a, b = f.pair
    w = f.widths or {}
    lines = [
        "# Interactive and bulk work on a stack, and its job with the width off",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. `up --replicas 2` (CPU, tiny model, "
        "engine.scheduling_policy priority, cache off, EOS ignored, max_tokens "
        f"{args.max_tokens}); a bulk job is {args.concurrency} batches of {args.batch} texts in flight "
        f"({args.width_from}), X-Priority: bulk; each window {args.seconds:g} s at most; `page` sends one "
        f"string every {args.interactive_every_s:g} s (or on its answer, when that takes longer), at most "
        f"{args.interactive} a phase, beside the job for as long as it runs (its latencies: the strings sent "
        f"within the window); {args.rounds} rounds of the four phases, each round in another order, "
        "the job alone with the width off on a second stack alike but for replica.interactive_window_s 0, "
        "right before or after the job alone (alternating), one stack working at a time; "
        f"engine.max_num_seqs {args.max_num_seqs or 'default (256)'}; the bulk width "
        f"{'off (replica.interactive_window_s 0)' if args.width_off else 'on'}. Client on the same cores. "
        f"Load average (1 min) {f.load[0]:.1f} at the start, {f.load[1]:.1f} at the end.",
        "",
        "| phase | interactive p50 ms | p95 ms | answered | failed | bulk texts/s | refused batches "
        "| narrowest width | most bulk queued |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| idle | {f.idle.p50_ms:.0f} | {f.idle.p95_ms:.0f} | {f.idle.answered} | {f.idle.failed} | - | - "
        f"| {_width(w, 'idle')} |",
        f"| bulk alone | - | - | - | - | {f.alone.per_s:.1f} | {f.alone.refused} | {_width(w, 'alone')} |",
        *_off_row(f, w),
        f"| bulk + interactive | {f.busy.p50_ms:.0f} | {f.busy.p95_ms:.0f} | {f.busy.answered} | "
        f"{f.busy.failed} | {f.beside.per_s:.1f} | {f.beside.refused} | {_width(w, 'beside')} |",
        f"| two keys: {a.key} / {b.key} | - | - | - | - | {a.per_s:.1f} / {b.per_s:.1f} | "
        f"{a.refused} / {b.refused} | {_width(w, 'pair')} |",
        "",
        "| target | measured | goal | met |",
        "|---|---|---|---|",
    ]
    for what, value, goal, met in verdicts(f):
        shown = (
            f"{value:.0%}" if goal.endswith("%") else f"{value:.2f}x" if goal[-1] == "x" else f"{value:.0f}"
        )
        lines.append(f"| {what} | {shown} | {goal} | {'yes' if met else 'NO'} |")
    failed = f.alone.failed + f.beside.failed + a.failed + b.failed + (f.off.failed if f.off else 0)
    lines += [
        "",
        "Each round's bulk with interactive / alone: " + ", ".join(f"{r:.2f}x" for r in f.round_ratios) + ".",
        *_off_rounds(f),
        f"Bulk batches failed (not 200, not 503): {failed}.",
        "",
        *where_lines(f.where or {}),
        f"Re-run: `python -m bench.fairness --seconds {args.seconds:g} --interactive {args.interactive} "
        f"--concurrency {args.concurrency} --batch {args.batch} --rounds {args.rounds}"
        + (f" --max-num-seqs {args.max_num_seqs}" if args.max_num_seqs else "")
        + (" --width-off" if args.width_off else "")
        + "`.",
    ]
    return "\n".join(lines) + "\n"


def _width(widths: dict[str, Width], phase: str) -> str:
    seen = widths.get(phase)
    return "- | -" if seen is None else f"{seen.narrowest} | {seen.most_queued}"


def _off_row(f: Figures, widths: dict[str, Width]) -> list[str]:
    """The table's row of the job alone with the width off (none where figures lack it)."""
    if f.off is None:
        return []
    row = f"| bulk alone, width off | - | - | - | - | {f.off.per_s:.1f} | {f.off.refused} |"
    return [f"{row} {_width(widths, 'off')} |"]


def _off_rounds(f: Figures) -> list[str]:
    if not f.off_ratios:
        return []
    return [
        "Each round's job alone, width on / width off: " + ", ".join(f"{r:.2f}x" for r in f.off_ratios) + "."
    ]

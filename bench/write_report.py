"""Assemble bench/results/: report.md, plots, and the compact k6 summary of every run."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench.k6run import K6Result, compact_summary
from bench.report import (
    Row,
    best_rate,
    plot_latency_over_time,
    plot_throughput,
    ratio,
    ratio_table,
    scenario_table,
)

if TYPE_CHECKING:
    from bench.run import Bench

SCENARIO_TITLES = {
    "ramp": "Localize a WebUI: ramping virtual users",
    "rate": "Open loop: constant arrival rate",
    "repeat": "Repeats: the same strings twice (cache)",
    "unequal": "Unequal replicas: least_conn vs round robin",
    "chaos": "Chaos: one replica killed mid-run",
}


def _find(rows: list[Row], setup: str) -> K6Result | None:
    return next((r.result for r in rows if r.setup == setup), None)


def headline(b: Bench) -> list[str]:
    """The ratios the issue asks for, stated in words."""
    lines = []
    ramp = b.results.get("ramp", [])
    named = (
        ("stack", "one-at-a-time", "Stack vs one-at-a-time baseline"),
        ("stack", "vLLM server", "Stack vs single vLLM server"),
        ("stack, 1 replica", "vLLM server", "Stack with one replica (one engine each) vs single vLLM server"),
    )
    for setup, base_name, label in named:
        stack, base = _find(ramp, setup), _find(ramp, base_name)
        if stack and base:
            lines.append(
                f"- {label} (ramp to {b.plan.ramp_vus} VUs): "
                f"{ratio(stack.req_per_s, base.req_per_s)} the requests/s "
                f"({stack.req_per_s:.1f} vs {base.req_per_s:.1f}), "
                f"{ratio(stack.tokens_per_s, base.tokens_per_s)} the generated tokens/s, "
                f"p95 {stack.latency_ms('p(95)'):.0f} ms vs {base.latency_ms('p(95)'):.0f} ms "
                f"({ratio(stack.latency_ms('p(95)'), base.latency_ms('p(95)'))}); "
                f"failed {stack.failed} vs {base.failed}."
            )
    unequal = b.results.get("unequal", [])
    lc, rr = _find(unequal, "stack, least_conn"), _find(unequal, "stack, round robin")
    if lc and rr:
        lines.append(
            f"- Unequal replicas, least_conn vs round robin: p95 {lc.latency_ms('p(95)'):.0f} ms vs "
            f"{rr.latency_ms('p(95)'):.0f} ms ({ratio(lc.latency_ms('p(95)'), rr.latency_ms('p(95)'))}); "
            f"p99 {lc.latency_ms('p(99)'):.0f} vs {rr.latency_ms('p(99)'):.0f} ms."
        )
    for row in b.results.get("chaos", []):
        r = row.result
        lines.append(
            f"- Chaos: {r.failed} failed of {r.requests} requests ({r.failure_rate * 100:.2f}%) with one "
            f"replica killed; p95 {r.latency_ms('p(95)'):.0f} ms, max {r.latency_ms('max'):.0f} ms."
        )
    repeat = b.results.get("repeat", [])
    first, second = _find(repeat, "stack, first pass"), _find(repeat, "stack, second pass")
    if first and second:
        lines.append(
            f"- Repeats: the second pass took p50 {second.latency_ms('med'):.0f} ms vs "
            f"{first.latency_ms('med'):.0f} ms, {second.cached_rate * 100:.0f}% answered from the cache."
        )
    for setup in ("stack", "vLLM server"):
        best = best_rate([r for r in b.results.get("rate", []) if r.setup == setup], b.plan.p95_ms)
        if best:
            lines.append(
                f"- Highest offered rate holding p95 < {b.plan.p95_ms:.0f} ms and errors < 0.1% "
                f"({setup}): {best.offered:g} req/s."
            )
    return lines


def comparisons(
    scenario: str, rows: list[Row], baselines: dict[str, K6Result]
) -> list[tuple[str, K6Result, K6Result]]:
    """What each scenario's ratio table compares: the stack to every baseline in the ramp, and to
    the vLLM server at each offered rate of the open loop."""
    if scenario == "ramp":
        return [
            (f"{row.setup} / {name}", row.result, base)
            for row in rows
            if row.setup not in baselines
            for name, base in baselines.items()
        ]
    if scenario == "rate":
        vllm = {row.offered: row.result for row in rows if row.setup == "vLLM server"}
        return [
            (f"stack / vLLM server at {row.offered:g}/s", row.result, vllm[row.offered])
            for row in rows
            if row.setup == "stack" and row.offered in vllm
        ]
    if scenario == "unequal":
        lc, rr = _find(rows, "stack, least_conn"), _find(rows, "stack, round robin")
        return [("least_conn / round robin", lc, rr)] if lc and rr else []
    return []


def write_report(b: Bench, out: Path, timings: dict[str, float], *, quick: bool) -> Path:
    """Write report.md (+ PNGs, summaries/) into out and return the report's path."""
    from bench.run import STACK_TARGETS

    out.mkdir(parents=True, exist_ok=True)
    stem = "quick" if quick else "full"
    summaries = out / f"summaries-{stem}"
    summaries.mkdir(exist_ok=True)
    for rows in b.results.values():
        for row in rows:
            data = compact_summary(row.result)
            (summaries / f"{row.result.name}.json").write_text(json.dumps(data, indent=1) + "\n")

    baselines: dict[str, K6Result] = {}
    for setup in ("one-at-a-time", "vLLM server"):
        found = _find(b.results.get("ramp", []), setup)
        if found:
            baselines[setup] = found

    md = [
        f"# `make bench` report ({'QUICK=1' if quick else 'full'})",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()}, "
        f"{os.cpu_count()} cores; model `{b.model.name}`; {b.plan.max_tokens} tokens at most per answer. "
        f"Every setup ran on the same machine in this one run; compare ratios, not absolute figures "
        "(the machine is shared and noisy).",
        "",
        "## Headline",
        "",
        *(headline(b) or ["- (no complete comparison in this run)"]),
        "",
    ]
    for scenario, title in SCENARIO_TITLES.items():
        rows = b.results.get(scenario, [])
        if not rows:
            continue
        md += [f"## {title}", "", scenario_table(rows, baselines if scenario == "ramp" else None), ""]
        pairs = comparisons(scenario, rows, baselines)
        if pairs:
            md += ["Each figure's ratio, setup / baseline:", "", ratio_table(pairs), ""]
        if scenario == "rate":
            series: dict[str, list[Row]] = {}
            for row in rows:
                series.setdefault(row.setup, []).append(row)
            plot_throughput(series, out / f"throughput-{stem}.png")
            md += [f"![throughput vs offered load](throughput-{stem}.png)", ""]
        if scenario in ("ramp", "chaos", "unequal"):
            kill = b.chaos_kill_time if scenario == "chaos" else None
            marks = [(kill, "replica killed")] if kill else []
            png = f"latency-{scenario}-{stem}.png"
            plot_latency_over_time([(r.setup, r.result) for r in rows], out / png, title, marks)
            md += [f"![latency over time: {scenario}]({png})", ""]

    md += ["## Notes", "", *[f"- {n}" for n in b.notes]]
    steps = ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
    md += [f"- Step durations: {steps}; total {b.elapsed()}."]
    md += [
        f"- k6 summaries of every run: `{summaries.name}/`. Failed = non-200 answers or transport errors",
        "  (k6 reuses connections; a uvicorn server closes idle ones after 5 s, and a request sent as",
        "  it closes fails with EOF); dropped = iterations the open loop could not start, all VUs busy.",
        f"- load = the highest 1-minute load average around the run, on {os.cpu_count()} cores. It counts",
        "  runnable threads, the measured setup's own too: a stack runs an engine core and a worker",
        "  process per replica, each spinning while it waits, so its load reads high by itself.",
        "- Setups: *one-at-a-time* = one engine behind a lock in one process, no Nginx, no batching",
        "  (bench/baselines/serial.py); *vLLM server* = `python -m vllm.entrypoints.openai.api_server`,",
        "  one instance, /v1/completions with the stack's prompt; *stack* = `hunyuan-serve up`",
        "  (Nginx least_conn + supervised replicas).",
        "- On CPU every setup starts at once and k6 runs only once all are ready, one setup at a time",
        "  (the stacks first); each setup stops after its runs.",
        "- Runs against the stack start past the strings it has answered and, past the last string, go",
        f"  on into {', '.join(STACK_TARGETS[1:4])}, ...: only the repeat pass meets its cache. Baselines",
        "  (no cache) all start on the first string, in Chinese.",
        "",
    ]
    path = out / f"report-{stem}.md"
    path.write_text("\n".join(md), encoding="utf-8")
    return path

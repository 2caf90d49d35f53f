"""Assemble bench/results/: report.md, plots, and the compact k6 summary of every run."""

from __future__ import annotations

import json
import os
import platform
import shlex
import time
from pathlib import Path

from bench import documents, likeforlike, multihost, names, refusal_probe
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
from bench.session import Bench
from bench.stream_ttft import HEADER
from bench.targets import Hardware

SCENARIO_TITLES = {
    names.RAMP: "Localize a WebUI: ramping virtual users",
    names.RATE: "Open loop: constant arrival rate",
    names.REPEAT: "Repeats: the same strings twice (cache)",
    names.UNEQUAL: "Unequal replicas: least_conn vs round robin",
    names.CHAOS: "Chaos: one replica killed mid-run",
    names.HOSTS: "Two hosts against one behind the gateway (network namespaces)",
}


def _find(rows: list[Row], setup: str) -> K6Result | None:
    return next((r.result for r in rows if r.setup == setup), None)


def headline(b: Bench) -> list[str]:
    """The ratios the issue asks for, stated in words."""
    lines = [likeforlike.headline(c) for c in b.alike]
    ramp = b.results.get(names.RAMP, [])
    # Against the one-at-a-time baseline only: both take the whole machine, and that row is about
    # batching. The vLLM server row is one engine on every core against pinned replicas, which says
    # nothing of the serving layer: the like-for-like rows compare that on equal cores.
    named = ((names.STACK, names.SERIAL, "Stack vs one-at-a-time baseline (same cores, one engine vs N)"),)
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
    unequal = b.results.get(names.UNEQUAL, [])
    lc, rr = _find(unequal, names.LEAST_CONN), _find(unequal, names.ROUND_ROBIN)
    if lc and rr:
        lines.append(
            f"- Unequal replicas, least_conn vs round robin: p95 {lc.latency_ms('p(95)'):.0f} ms vs "
            f"{rr.latency_ms('p(95)'):.0f} ms ({ratio(lc.latency_ms('p(95)'), rr.latency_ms('p(95)'))}); "
            f"p99 {lc.latency_ms('p(99)'):.0f} vs {rr.latency_ms('p(99)'):.0f} ms."
        )
    for row in b.results.get(names.CHAOS, []):
        r = row.result
        lines.append(
            f"- Chaos: {r.failed} failed of {r.requests} requests ({r.failure_rate * 100:.2f}%) with one "
            f"replica killed; p95 {r.latency_ms('p(95)'):.0f} ms, max {r.latency_ms('max'):.0f} ms."
        )
    lines += multihost.headline(b)
    lines += overload_headline(b)
    repeat = b.results.get(names.REPEAT, [])
    first, second = _find(repeat, names.FIRST_PASS), _find(repeat, names.SECOND_PASS)
    if first and second:
        lines.append(
            f"- Repeats: the second pass took p50 {second.latency_ms('med'):.0f} ms vs "
            f"{first.latency_ms('med'):.0f} ms, {second.cached_rate * 100:.0f}% answered from the cache."
        )
    for setup in (names.STACK, names.VLLM):
        rows = [r for r in b.results.get(names.RATE, []) if r.setup == setup]
        best = best_rate(rows, b.plan.p95_ms, b.plan.fail_rate)
        if best:
            lines.append(
                f"- Highest offered rate holding p95 < {b.plan.p95_ms:.0f} ms and errors < "
                f"{b.plan.fail_rate * 100:g}% "
                f"({setup}): {best.offered:g} req/s."
            )
    return lines


def overload_headline(b: Bench) -> list[str]:
    rows = b.results.get(names.OVERLOAD, [])
    if not rows:
        return []
    r, o = rows[0].result, b.overload
    goodput = r.value("accepted_latency", "count") / r.duration_s if r.duration_s else 0.0
    return [
        f"- Overload at {rows[0].offered:g} req/s ({b.plan.overload_factor}x the measured "
        f"{o.get('capacity_rps', 0):g}): refusals p99 {r.value('refused_latency', 'p(99)'):.0f} ms as k6 "
        f"measured them, {o.get('nginx_refused_99_ms', 0):.0f} ms in Nginx's log, "
        f"{o.get('probe_refused_99_ms', 0):.0f} ms by the probe beside k6 "
        f"({r.value('refused', 'rate') * 100:.0f}% refused), accepted p95 "
        f"{r.value('accepted_latency', 'p(95)'):.0f} ms vs {o.get('capacity_p95_ms', 0):.0f} ms at capacity, "
        f"{goodput:.1f} accepted req/s; {r.failed} failed."
    ]


def overload_section(b: Bench) -> list[str]:
    """The overload run: what was refused and how fast (as k6 and as Nginx itself measured it), what was
    served and how fast, memory."""
    rows = b.results.get(names.OVERLOAD, [])
    if not rows:
        return []
    r, o = rows[0].result, b.overload
    accepted = round(r.value("accepted_latency", "count"))

    def ms(value: float) -> str:
        return f"{value:.1f}"  # tenths: an edge refusal can take well under a millisecond

    load_head = ["offered/s", "capacity/s", "edge cap per replica", "VUs", "requests", "accepted"]
    load_head += ["accepted/s", "refused", "failed", "dropped"]
    load = [f"{rows[0].offered:g}", f"{o.get('capacity_rps', 0):g}", f"{o.get('edge_cap', 0):g}"]
    load += [f"{o.get('vus', 0):g}", str(r.requests), str(accepted)]
    load += [f"{accepted / r.duration_s:.1f}" if r.duration_s else "-"]
    load += [str(round(r.value("refused", "passes"))), str(r.failed), str(r.dropped)]
    time_head = ["refused p50/p95/p99 ms (k6)", "refused p50/p95/p99 ms (Nginx)"]
    time_head += ["refused p50/p95/p99 ms (probe)", "accepted p95 ms"]
    time_head += ["p95 at capacity ms", "Nginx MB before → after", "replicas MB before → after"]
    times = [
        " / ".join(ms(r.value("refused_latency", s)) for s in ("med", "p(95)", "p(99)")),
        " / ".join(ms(o.get(f"nginx_refused_{q}_ms", 0)) for q in (50, 95, 99)),
        " / ".join(ms(o.get(f"probe_refused_{q}_ms", 0)) for q in (50, 95, 99)),
        ms(r.value("accepted_latency", "p(95)")),
        f"{o.get('capacity_p95_ms', 0):.0f}",
        f"{o.get('nginx_mb_before', 0):.0f} → {o.get('nginx_mb_after', 0):.0f}",
        f"{o.get('replicas_mb_before', 0):.0f} → {o.get('replicas_mb_after', 0):.0f}",
    ]
    return [
        f"## Overload: {b.plan.overload_factor}x the measured capacity for {b.plan.overload_duration}",
        "",
        *_table(load_head, load),
        "",
        *_table(time_head, times),
        "",
        "Refused = a JSON 503 with Retry-After (Nginx's own once every replica is at its edge cap, or a",
        "replica's); failed = anything else that is not a 200. Capacity: the most req/s any earlier run",
        "of the stack served without failures (ramp, open loop, first pass); p95 at capacity is that run's.",
        "Refusal time (k6) is what the client measured; (Nginx) is the access log's request_time of the",
        f"{o.get('nginx_refusals', 0):g} 503s Nginx answered itself: from its reading the request's first",
        "byte to the client's closing the connection (Nginx logs after that), in 1 ms steps; so it leaves",
        "out k6's connect and send, not its reading the answer. (probe): bench/refusal_probe.py, a client",
        f"beside k6 at nice {refusal_probe.NICE}, one request at a time on a new connection, each of its",
        f"{o.get('probe_refusals', 0):g} 503s timed from its connecting to the answer's first byte.",
        "VUs: every replica full at its edge cap plus the refusals of "
        f"{b.plan.overload_refusal_vu_s:g} s at the offered rate, all started before the run.",
        "Memory: resident, Nginx's master and workers, and every replica's process tree.",
        "",
    ]


def _table(head: list[str], cells: list[str]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), "| " + " | ".join(cells) + " |"]


def comparisons(
    scenario: str, rows: list[Row], baselines: dict[str, K6Result]
) -> list[tuple[str, K6Result, K6Result]]:
    """What each scenario's ratio table compares: the stack to the baselines of equal resources in the
    ramp (names.RATIO_BASELINES); the vLLM server on every core is listed, never divided by."""
    if scenario == names.RAMP:
        return [
            (f"{row.setup} / {name}", row.result, base)
            for row in rows
            if row.setup not in baselines
            for name, base in baselines.items()
            if name in names.RATIO_BASELINES
        ]
    if scenario == names.UNEQUAL:
        lc, rr = _find(rows, names.LEAST_CONN), _find(rows, names.ROUND_ROBIN)
        return [("least_conn / round robin", lc, rr)] if lc and rr else []
    if scenario == names.HOSTS:
        return multihost.comparison(rows)
    return []


def streaming_section(b: Bench) -> list[str]:
    """OpenAI streaming: time to first token and tokens/s of each setup measured (bench/stream_ttft.py)."""
    if not b.streaming:
        return []
    plan = b.plan
    return [
        "## OpenAI streaming: time to first token",
        "",
        f"{plan.stream_requests} streamed `/v1/chat/completions` per setup, "
        f"{plan.stream_concurrency} at once, the family's prompt and sampling; TTFT is the first "
        "content delta as the client reads it, tokens are each stream's usage over the run's wall time.",
        "",
        HEADER,
        *[figures.row(setup) for setup, figures in b.streaming.items()],
        "",
    ]


def write_report(b: Bench, out: Path, timings: dict[str, float], *, quick: bool, hardware: Hardware) -> Path:
    """Write report.md (+ PNGs, summaries/) into out and return the report's path."""
    out.mkdir(parents=True, exist_ok=True)
    stem = ("quick" if quick else "full") + (f"-{b.plan.only}" if b.plan.only else "")
    summaries = write_summaries(b, out / f"summaries-{stem}")
    baselines = {
        setup: found for setup in names.BASELINES if (found := _find(b.results.get(names.RAMP, []), setup))
    }
    where = f"GPUs {', '.join(map(str, hardware.gpus))}" if hardware.on_gpu else "CPU only"
    md = [
        f"# `make bench` report ({'QUICK=1' if quick else 'full'})",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()}, "
        f"{os.cpu_count()} cores, {where}; model `{b.model.name}`; {b.plan.max_tokens} tokens at most "
        "per answer. Every setup ran on the same machine in this one run; compare ratios, not absolute "
        "figures (the machine is shared and noisy).",
        "",
        "## Headline",
        "",
        *(headline(b) or ["- (no complete comparison in this run)"]),
        "",
    ]
    for scenario, title in SCENARIO_TITLES.items():
        rows = b.results.get(scenario, [])
        if rows:
            md += scenario_section(b, scenario, title, rows, baselines, out, stem)
    md += likeforlike.report(b.alike, lfl_context(b, hardware))
    md += overload_section(b)
    md += streaming_section(b)
    md += documents.section(b.documents)
    md += notes_section(b, timings, summaries.name, hardware)
    path = out / f"report-{stem}.md"
    path.write_text("\n".join(md), encoding="utf-8")
    return path


def write_summaries(b: Bench, summaries: Path) -> Path:
    """The compact k6 summary of every run, one JSON file each; returns their directory."""
    summaries.mkdir(parents=True, exist_ok=True)
    for rows in b.results.values():
        for row in rows:
            data = compact_summary(row.result)
            (summaries / f"{row.result.name}.json").write_text(json.dumps(data, indent=1) + "\n")
    return summaries


def scenario_section(
    b: Bench,
    scenario: str,
    title: str,
    rows: list[Row],
    baselines: dict[str, K6Result],
    out: Path,
    stem: str,
) -> list[str]:
    """One scenario's table, its ratios to the baselines, and its plot."""
    ratio_columns = {k: v for k, v in baselines.items() if k in names.RATIO_BASELINES}
    md = [f"## {title}", "", scenario_table(rows, ratio_columns if scenario == names.RAMP else None), ""]
    pairs = comparisons(scenario, rows, baselines)
    if pairs:
        md += ["Each figure's ratio, setup / baseline:", "", ratio_table(pairs), ""]
    if scenario == names.RATE:
        series: dict[str, list[Row]] = {}
        for row in rows:
            series.setdefault(row.setup, []).append(row)
        plot_throughput(series, out / f"throughput-{stem}.png")
        md += [f"![throughput vs offered load](throughput-{stem}.png)", ""]
    if scenario in (names.RAMP, names.CHAOS, names.UNEQUAL):
        kill = b.chaos_kill_time if scenario == names.CHAOS else None
        marks = [(kill, "replica killed")] if kill else []
        png = f"latency-{scenario}-{stem}.png"
        plot_latency_over_time([(r.setup, r.result) for r in rows], out / png, title, marks)
        md += [f"![latency over time: {scenario}]({png})", ""]
    return md


def notes_section(b: Bench, timings: dict[str, float], summaries: str, hardware: Hardware) -> list[str]:
    """The run's own notes, its step durations, and how to read the tables."""
    steps = ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
    starts = (
        "- On GPUs the setups start one at a time (each would claim the same device memory); the stack's "
        "replicas run one per GPU, the one-replica stack and the baselines on the first GPU."
        if hardware.on_gpu
        else "- On CPU every setup starts at once and k6 runs only once all are ready, one setup at a time\n"
        "  (the stacks first); each setup stops after its runs."
    )
    return [
        "## Notes",
        "",
        *[f"- {n}" for n in b.notes],
        f"- Step durations: {steps}; total {b.elapsed()}.",
        f"- k6 summaries of every run: `{summaries}/`. Failed = non-200 answers or transport errors",
        "  (k6 reuses connections; a uvicorn server closes idle ones after 5 s, and a request sent as",
        "  it closes fails with EOF); dropped = iterations the open loop could not start, all VUs busy.",
        f"- load = the highest 1-minute load average around the run, on {os.cpu_count()} cores. It counts",
        "  runnable threads, the measured setup's own too: a stack runs an engine core and a worker",
        "  process per replica, each spinning while it waits, so its load reads high by itself.",
        f"- Setups: *{names.SERIAL}* = one engine behind a lock in one process, no Nginx, no batching",
        f"  (bench/baselines/serial.py); *{names.VLLM}* = `python -m vllm.entrypoints.openai.api_server`,",
        "  one instance on every core, /v1/completions with the stack's prompt: one engine against the",
        "  stack's pinned replicas, so no ratio is taken to it (the like-for-like rows compare servers",
        f"  on equal cores); *{names.STACK}* = `hunyuan-serve up`",
        "  (Nginx least_conn + supervised replicas). Every request sends the model family's recommended",
        f"  sampling: {', '.join(f'{k} {v}' for k, v in b.sampling.as_dict().items())}.",
        starts,
        "- Runs against the stack start past the strings it has answered and, past the last string, go",
        f"  on into {', '.join(names.STACK_TARGETS[1:4])}, ...: only the repeat pass meets its cache.",
        "  Baselines (no cache) all start on the first string, in Chinese.",
        "",
    ]


def lfl_context(b: Bench, hardware: Hardware) -> list[str]:
    where = f"GPUs {', '.join(map(str, hardware.gpus))}" if hardware.on_gpu else f"{os.cpu_count()} CPU cores"
    return [
        f"Each row: both setups on the same {where}, the same model (`{b.model.name}`), engine settings, "
        f"sampling and prompts, {b.plan.lfl_max_tokens} generated tokens per string with EOS ignored; "
        "rounds alternate within one run and the ratio is the median of the rounds' ratios."
    ]


def write_likeforlike_report(
    b: Bench, out: Path, hardware: Hardware, *, quick: bool, argv: list[str]
) -> Path:
    """report-likeforlike.md (or -<row>.md for one row): the like-for-like rows alone, with the
    command that reproduces them, the time and load, the pinning."""
    out.mkdir(parents=True, exist_ok=True)
    stem = ("quick-" if quick else "") + "likeforlike"
    stem += "" if b.plan.only == names.LIKEFORLIKE else f"-{b.plan.only}"
    one, five, fifteen = os.getloadavg()
    # shlex.join: an argument with spaces (--translate-flags '--concurrency 8') comes back quoted.
    command = shlex.join(["python", "-m", "bench.run", *(["--quick"] if quick else []), *argv])
    md = [
        "# `make bench`: like for like",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()}, "
        f"{os.cpu_count()} cores, {'GPUs ' + ', '.join(hardware.gpus) if hardware.on_gpu else 'CPU only'}; "
        f"load average at the end {one:.2f} / {five:.2f} / {fifteen:.2f} (the machine is shared with "
        "other sessions' work; the rows' own load is in their notes). Reproduce (under the shared lock):",
        "",
        f"    flock /tmp/hs-heavy.lock {command}",
        "",
        *likeforlike.report(b.alike, lfl_context(b, hardware)),
        "## Notes",
        "",
        *[f"- {n}" for n in b.notes],
        f"- Total {b.elapsed()}.",
        "",
    ]
    path = out / f"report-{stem}.md"
    path.write_text("\n".join(md), encoding="utf-8")
    return path

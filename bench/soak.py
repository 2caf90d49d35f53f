"""`python -m bench soak`: steady open-loop load on the stack for an hour, one replica killed every ten
minutes; Nginx's and the replicas' memory and open files, and p95, over time, plotted."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import targets
from bench.k6run import K6Result, read_samples, run_k6
from bench.session import Bench


@dataclass
class Sample:
    t: float  # unix time
    who: str  # "nginx" or a replica's name
    rss_mb: float
    open_files: int


@dataclass
class SoakLog:
    samples: list[Sample] = field(default_factory=list)
    kills: list[tuple[float, str]] = field(default_factory=list)


def _tree(pid: int) -> tuple[float, int]:
    """Resident MB and open file descriptors of a process and its descendants."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0, 0
    rss, fds = 0, 0
    for proc in procs:
        try:
            rss += proc.memory_info().rss
            fds += proc.num_fds()
        except psutil.Error:
            continue
    return rss / 2**20, fds


def sample_stack(run_dir: Path, log: SoakLog) -> None:
    status = targets.stack_status(run_dir)
    now = time.time()
    members = [("nginx", int((status.get("nginx") or {}).get("pid") or 0))]
    members += [(str(r["name"]), int(r.get("pid") or 0)) for r in status.get("replicas", [])]
    for who, pid in members:
        if pid:
            rss, fds = _tree(pid)
            log.samples.append(Sample(now, who, rss, fds))


def chaos_and_meter(
    run_dir: Path, log: SoakLog, stop: threading.Event, kill_every_s: float, every_s: float
) -> None:
    """Until stop: sample every every_s; every kill_every_s SIGKILL the next replica in turn."""
    start, kills = time.monotonic(), 0
    while not stop.wait(every_s):
        sample_stack(run_dir, log)
        if time.monotonic() - start >= (kills + 1) * kill_every_s:
            replicas = targets.stack_status(run_dir).get("replicas", [])
            if replicas:
                victim = replicas[kills % len(replicas)]
                if victim.get("pid"):
                    os.kill(int(victim["pid"]), signal.SIGKILL)
                    log.kills.append((time.time(), str(victim["name"])))
            kills += 1


def p95_per_minute(result: K6Result) -> list[tuple[float, float, int]]:
    """(minute start, p95 ms of the 200s, failures) per minute of the run."""
    buckets: dict[int, list[tuple[float, bool]]] = {}
    for t, value, ok in read_samples(result.samples_path):
        buckets.setdefault(int(t // 60), []).append((value, ok))
    out = []
    for minute, rows in sorted(buckets.items()):
        good = sorted(v for v, ok in rows if ok)
        p95 = good[min(len(good) - 1, int(0.95 * len(good)))] if good else 0.0
        out.append((minute * 60.0, p95, sum(1 for _, ok in rows if not ok)))
    return out


def plot_soak(log: SoakLog, result: K6Result, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (mem, fds, lat) = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    t0 = min((s.t for s in log.samples), default=time.time())
    for who in sorted({s.who for s in log.samples}):
        mine = [s for s in log.samples if s.who == who]
        minutes = [(s.t - t0) / 60 for s in mine]
        mem.plot(minutes, [s.rss_mb for s in mine], label=who)
        fds.plot(minutes, [s.open_files for s in mine], label=who)
    per_minute = p95_per_minute(result)
    # Each minute's p95 at the middle of its minute (minutes are whole clock minutes, not the run's).
    lat.plot(
        [max(0.0, (t + 30 - t0) / 60) for t, _, _ in per_minute],
        [p for _, p, _ in per_minute],
        marker=".",
        label="p95",
    )
    for ax, label in ((mem, "resident MB"), (fds, "open files"), (lat, "p95 ms (200s), per minute")):
        ax.set_ylabel(label)
        for t, _ in log.kills:
            ax.axvline((t - t0) / 60, color="red", alpha=0.4)
        ax.legend(loc="upper left", fontsize="small")
    lat.set_xlabel("minutes (red: a replica killed with SIGKILL)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def bench_soak(
    b: Bench, url: str, run_dir: Path, out: Path, *, minutes: float, kill_every_min: float, rate: int
) -> Path:
    """The soak run itself; writes soak.md and soak.png into out and returns the report's path."""
    log, stop = SoakLog(), threading.Event()
    sample_stack(run_dir, log)
    args = (run_dir, log, stop, kill_every_min * 60, 15.0)
    meter = threading.Thread(target=chaos_and_meter, args=args, daemon=True)
    meter.start()
    env = b.env(url, stack=True, rate=rate, duration=f"{round(minutes * 60)}s")
    try:
        result = run_k6("rate.js", "soak", b.work / "k6", env, k6=b.k6_bin, timeout_s=minutes * 60 + 600)
    finally:
        stop.set()
        meter.join(30)
    sample_stack(run_dir, log)
    out.mkdir(parents=True, exist_ok=True)
    # The raw samples beside the report, so a plot or table can be made again without an hour's run.
    raw = {"samples": [vars(s) for s in log.samples], "kills": log.kills}
    (out / "soak-samples.json").write_text(json.dumps(raw) + "\n", encoding="utf-8")
    plot_soak(log, result, out / "soak.png")
    path = out / "soak.md"
    path.write_text("\n".join(soak_report(log, result, minutes, rate)) + "\n", encoding="utf-8")
    return path


def window_table(log: SoakLog, result: K6Result, window_s: float) -> list[str]:
    """Per window of the run: p95 of the 200s, failures, and the largest resident MB and open files of
    each process in it; flat columns are the goal."""
    t0 = min((s.t for s in log.samples), default=0.0)
    whos = sorted({s.who for s in log.samples})
    rows: dict[int, list[tuple[float, bool]]] = {}
    for t, value, ok in read_samples(result.samples_path):
        rows.setdefault(int(max(0.0, t - t0) // window_s), []).append((value, ok))
    head = "| minutes | requests | failed | p95 ms | " + " | ".join(f"{w} MB / files" for w in whos) + " |"
    md = [f"Per {window_s / 60:g} minutes:", "", head, "|" + "---|" * (4 + len(whos))]
    for index in sorted(rows):
        good = sorted(v for v, ok in rows[index] if ok)
        p95 = good[min(len(good) - 1, int(0.95 * len(good)))] if good else 0.0
        cells = []
        for who in whos:
            mine = [s for s in log.samples if s.who == who and int((s.t - t0) // window_s) == index]
            rss = max((s.rss_mb for s in mine), default=0.0)
            cells.append(f"{rss:.0f} / {max((s.open_files for s in mine), default=0)}")
        span = f"{index * window_s / 60:g}-{(index + 1) * window_s / 60:g}"
        failed = sum(1 for _, ok in rows[index] if not ok)
        md.append(f"| {span} | {len(rows[index])} | {failed} | {p95:.0f} | " + " | ".join(cells) + " |")
    return [*md, ""]


def soak_report(log: SoakLog, result: K6Result, minutes: float, rate: int) -> list[str]:
    """First and last sample of each process, the run's figures, and the plot."""
    md = [
        f"# Soak: {minutes:g} min at {rate} req/s, a replica killed every so often ({len(log.kills)} kills)",
        "",
        f"{result.requests} requests, {result.failed} failed ({result.failure_rate * 100:.3f}%), "
        f"p95 {result.latency_ms('p(95)'):.0f} ms, p99 {result.latency_ms('p(99)'):.0f} ms.",
        "",
        "| process | MB first | MB last | open files first | open files last |",
        "|---|---|---|---|---|",
    ]
    for who in sorted({s.who for s in log.samples}):
        mine = [s for s in log.samples if s.who == who]
        first, last = mine[0], mine[-1]
        md.append(
            f"| {who} | {first.rss_mb:.0f} | {last.rss_mb:.0f} | {first.open_files} | {last.open_files} |"
        )
    md += ["", "A killed replica starts again as a new process: its line restarts from its start-up.", ""]
    md += window_table(log, result, window_s=600.0)
    return [*md, "![memory, open files and p95 over time](soak.png)"]

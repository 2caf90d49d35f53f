"""The Markdown report and PNG plots of one `make bench` run, from the k6 results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.k6run import K6Result, read_samples

STATS = (("p50", "med"), ("p90", "p(90)"), ("p95", "p(95)"), ("p99", "p(99)"))


@dataclass
class Row:
    """One line of a scenario table: which setup, and its k6 result."""

    setup: str
    result: K6Result
    offered: float | None = None  # requests/s offered, for open-loop runs


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base > 0 else "-"


def scenario_table(rows: Sequence[Row], baselines: dict[str, K6Result] | None = None) -> str:
    """A Markdown table: req/s, tok/s, latency percentiles, failures, and ratios to each baseline."""
    baselines = baselines or {}
    head = ["setup", "offered/s", "requests", "req/s", "gen tok/s"]
    head += [f"{label} ms" for label, _ in STATS] + ["failed", "dropped", "load"]
    for name in baselines:
        head += [f"req/s vs {name}", f"p95 vs {name}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        r = row.result
        cells = [
            row.setup,
            f"{row.offered:g}" if row.offered else "closed",
            str(r.requests),
            f"{r.req_per_s:.1f}",
            f"{r.tokens_per_s:.0f}",
        ]
        cells += [f"{r.latency_ms(stat):.0f}" for _, stat in STATS]
        cells += [f"{r.failed} ({r.failure_rate * 100:.2f}%)", str(r.dropped), f"{r.load:.1f}"]
        for base in baselines.values():
            p95 = ratio(r.latency_ms("p(95)"), base.latency_ms("p(95)"))
            cells += [ratio(r.req_per_s, base.req_per_s), p95]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ratio_table(pairs: Sequence[tuple[str, K6Result, K6Result]]) -> str:
    """A Markdown table of every figure's ratio, one row per (label, setup's result, baseline's result).

    Throughput ratios above 1 and latency ratios below 1 favour the setup.
    """
    head = ["comparison", "req/s", "gen tok/s"] + [f"{label}" for label, _ in STATS] + ["failed"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, r, base in pairs:
        cells = [label, ratio(r.req_per_s, base.req_per_s), ratio(r.tokens_per_s, base.tokens_per_s)]
        cells += [ratio(r.latency_ms(stat), base.latency_ms(stat)) for _, stat in STATS]
        cells.append(f"{r.failed} vs {base.failed}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best_rate(rows: Sequence[Row], p95_target_ms: float, max_fail: float = 0.001) -> Row | None:
    """The highest offered rate whose p95 stays under the target, errors under max_fail, nothing dropped."""
    good = [
        r
        for r in rows
        if r.offered
        and r.result.latency_ms("p(95)") < p95_target_ms
        and r.result.failure_rate < max_fail
        and r.result.dropped == 0
    ]
    return max(good, key=lambda r: r.offered or 0.0) if good else None


def rolling_p95(points: Sequence[tuple[float, float]], width_s: float = 1.0) -> list[tuple[float, float]]:
    """p95 of the latencies of requests started in each `width_s` window, at the window's middle."""
    bins: dict[int, list[float]] = {}
    for t, v in points:
        bins.setdefault(int(t // width_s), []).append(v)
    out = []
    for key in sorted(bins):
        values = sorted(bins[key])
        out.append(((key + 0.5) * width_s, values[min(len(values) - 1, int(0.95 * len(values)))]))
    return out


def plot_latency_over_time(
    series: Sequence[tuple[str, K6Result]], path: Path, title: str, marks: Sequence[tuple[float, str]] = ()
) -> None:
    """Per-request latency against seconds since each run's start; failures as x; marks in unix time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    first_t0: float | None = None
    for label, result in series:
        samples = read_samples(result.samples_path)
        if not samples:
            continue
        # k6 stamps a sample when the request ends; its start is what lines up with events.
        t0 = min(t - v / 1000.0 for t, v, _ in samples)
        first_t0 = t0 if first_t0 is None else first_t0
        ok = [(t - v / 1000.0 - t0, v) for t, v, good in samples if good]
        bad = [(t - v / 1000.0 - t0, v) for t, v, good in samples if not good]
        if ok:
            points = ax.scatter([t for t, _ in ok], [v for _, v in ok], s=4, alpha=0.35, label=f"{label}")
            bins = rolling_p95(ok)
            ax.plot(
                [t for t, _ in bins],
                [v for _, v in bins],
                color=points.get_facecolor()[0],
                alpha=1.0,
                linewidth=1.5,
                label=f"{label} p95 per second",
            )
        if bad:
            ax.scatter([t for t, _ in bad], [v for _, v in bad], s=18, marker="x", label=f"{label} failed")
    for at, text in marks:
        if first_t0 is None:
            continue
        ax.axvline(at - first_t0, color="red", linestyle="--", linewidth=1)
        ax.text(at - first_t0, ax.get_ylim()[1] * 0.95, f" {text}", color="red", va="top")
    ax.set_xlabel("request start, seconds since the run began")
    ax.set_ylabel("request latency (ms)")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8, markerscale=3)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_throughput(series: Mapping[str, Sequence[Row]], path: Path) -> None:
    """Achieved requests/s and p95 against offered requests/s, one line per setup."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    top = 0.0
    for setup, rows in series.items():
        pts = sorted((r.offered or 0.0, r.result) for r in rows if r.offered)
        if not pts:
            continue
        xs = [x for x, _ in pts]
        top = max(top, *xs)
        left.plot(xs, [res.req_per_s for _, res in pts], marker="o", label=setup)
        right.plot(xs, [res.latency_ms("p(95)") for _, res in pts], marker="o", label=setup)
    left.plot([0, top], [0, top], color="grey", linestyle=":", label="offered")
    left.set_xlabel("offered requests/s")
    left.set_ylabel("completed requests/s")
    left.set_title("throughput vs offered load")
    right.set_xlabel("offered requests/s")
    right.set_ylabel("p95 latency (ms)")
    right.set_yscale("log")
    right.set_title("p95 vs offered load")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""Table tests of the bench's arithmetic: k6 summaries, ratios, the best rate, counters, samples."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from bench import names
from bench.k6run import K6Result, read_samples
from bench.procs import counter_delta, counter_value
from bench.report import Row, best_rate, ratio, ratio_table, rolling_p95, scenario_table
from bench.session import Bench, Plan
from bench.setups import GPU_UNEQUAL_SKIPPED
from bench.targets import Hardware
from bench.write_report import comparisons, headline, write_report
from hunyuan_serve.families import HUNYUAN_SAMPLING


def result(
    name: str = "r",
    *,
    reqs: int = 100,
    rate: float = 10.0,
    p95: float = 1000.0,
    failed: int = 0,
    dropped: int = 0,
    tokens: float | None = None,
    duration_s: float = 10.0,
) -> K6Result:
    metrics = {
        "http_reqs": {"values": {"count": reqs, "rate": rate}},
        "http_req_duration": {
            "values": {"med": p95 / 2, "p(90)": p95 * 0.9, "p(95)": p95, "p(99)": p95 * 1.2}
        },
        "failed_requests": {"values": {"rate": failed / reqs if reqs else 0.0, "passes": failed}},
        "dropped_iterations": {"values": {"count": dropped}},
        "gen_tokens": {"values": {"count": 0, "rate": 0.0}},
    }
    return K6Result(name, Path("s.json"), Path("s.csv"), 0, 1.0, metrics, duration_s, tokens)


@pytest.mark.parametrize(
    ("value", "base", "expected"),
    [(20.0, 10.0, "2.00x"), (5.0, 10.0, "0.50x"), (1.0, 0.0, "-"), (0.0, 3.0, "0.00x")],
)
def test_ratio(value: float, base: float, expected: str) -> None:
    assert ratio(value, base) == expected


def test_k6_result_reads_the_summary_figures() -> None:
    r = result(reqs=200, rate=20.0, p95=800.0, failed=2, dropped=3, tokens=500.0, duration_s=10.0)
    assert (r.requests, r.req_per_s, r.failed, r.dropped) == (200, 20.0, 2, 3)
    assert r.failure_rate == pytest.approx(0.01)
    assert r.latency_ms("p(95)") == 800.0
    assert r.latency_ms("max") == 0.0  # absent statistics read as zero, not a KeyError
    assert r.tokens_per_s == 50.0  # server-side count over k6's own duration


def test_tokens_per_s_falls_back_to_k6s_counter_without_a_server_count() -> None:
    r = result(tokens=None)
    r.metrics["gen_tokens"] = {"values": {"count": 70, "rate": 7.0}}
    assert r.tokens_per_s == 7.0


# (offered, p95 ms, failed of 1000, dropped) per row -> the offered rate best_rate picks (target 5000 ms)
BEST_RATE_CASES = [
    ([(10, 900, 0, 0), (20, 2000, 0, 0), (40, 6000, 0, 0)], 20),  # p95 over the target at 40
    ([(10, 900, 0, 0), (20, 2000, 1, 0)], 10),  # 0.1% errors is not under 0.1%
    ([(10, 900, 0, 0), (20, 2000, 0, 5)], 10),  # dropped iterations: the server did not keep up
    ([(40, 100, 0, 0), (10, 100, 0, 0)], 40),  # order of the rows does not matter
    ([(10, 5000, 0, 0)], None),  # exactly the target is not under it
    ([], None),
]


@pytest.mark.parametrize(("rows", "expected"), BEST_RATE_CASES)
def test_best_rate(rows: list[tuple[int, float, int, int]], expected: int | None) -> None:
    table = [
        Row("stack", result(reqs=1000, p95=p95, failed=failed, dropped=dropped), float(offered))
        for offered, p95, failed, dropped in rows
    ]
    best = best_rate(table, 5000.0)
    assert (best.offered if best else None) == expected


def test_best_rate_ignores_closed_loop_rows() -> None:
    assert best_rate([Row("stack", result(p95=1.0), None)], 5000.0) is None


@pytest.mark.parametrize(
    ("before", "after", "delta"),
    [(10.0, 25.0, 15.0), (None, 25.0, 25.0), (30.0, 5.0, 5.0), (10.0, None, 0.0), (None, None, 0.0)],
)
def test_counter_delta_survives_restarts_and_unreachable_scrapes(
    before: float | None, after: float | None, delta: float
) -> None:
    assert counter_delta(before, after) == delta


def test_counter_value_sums_labels_and_the_total_suffix() -> None:
    text = "\n".join(
        [
            "# HELP hunyuan_generation_tokens_total Tokens the engine generated.",
            "# TYPE hunyuan_generation_tokens_total counter",
            "hunyuan_generation_tokens_total 120.0",
            "hunyuan_generation_tokens_created 1.7e9",
            'hunyuan_cache_hits_total{layer="memory"} 3.0',
            'hunyuan_cache_hits_total{layer="sqlite"} 4.0',
            "hunyuan_generation_tokens_other 99.0",
        ]
    )
    assert counter_value(text, "hunyuan_generation_tokens") == 120.0
    assert counter_value(text, "hunyuan_cache_hits") == 7.0
    assert counter_value(text, "absent") == 0.0


def test_rolling_p95_bins_by_second() -> None:
    points = [(0.1, 10.0), (0.5, 30.0), (0.9, 20.0), (1.2, 5.0), (3.7, 7.0)]
    assert rolling_p95(points) == [(0.5, 30.0), (1.5, 5.0), (3.5, 7.0)]


def test_read_samples_keeps_one_metric_in_time_order_and_marks_failures(tmp_path: Path) -> None:
    path = tmp_path / "samples.csv.gz"
    rows = [
        "metric_name,timestamp,metric_value,status",
        "http_req_duration,2000,15.5,200",
        "http_reqs,1000,1,200",
        "http_req_duration,1000,12.0,502",
    ]
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(rows) + "\n")
    assert read_samples(path) == [(1.0, 12.0, False), (2.0, 15.5, True)]
    assert read_samples(tmp_path / "missing.csv") == []


def test_scenario_table_states_each_ratio_to_the_baseline() -> None:
    base = result(rate=5.0, p95=4000.0)
    table = scenario_table([Row("stack", result(rate=20.0, p95=1000.0))], {"one-at-a-time": base})
    header, _, line = table.splitlines()
    assert header.endswith("| req/s vs one-at-a-time | p95 vs one-at-a-time |")
    assert line.startswith("| stack | closed | 100 | 20.0 |")
    assert line.endswith("| 4.00x | 0.25x |")


def test_headline_states_the_ratios_the_issue_asks_for(tmp_path: Path) -> None:
    b = Bench(Plan(), tmp_path, tmp_path / "model", tmp_path / "items.json", "k6", HUNYUAN_SAMPLING)
    b.results = {
        names.RAMP: [
            Row(names.SERIAL, result(rate=4.0, p95=8000.0)),
            Row(names.VLLM, result(rate=16.0, p95=2000.0)),
            Row(names.STACK, result(rate=20.0, p95=1000.0)),
        ],
        names.UNEQUAL: [
            Row(names.LEAST_CONN, result(p95=600.0), 8.0),
            Row(names.ROUND_ROBIN, result(p95=1200.0), 8.0),
        ],
        names.CHAOS: [Row(names.KILLED, result(reqs=300, failed=0), 6.0)],
        names.RATE: [Row(names.STACK, result(p95=900.0), 10.0), Row(names.STACK, result(p95=9000.0), 20.0)],
    }
    lines = headline(b)
    assert any(
        line.startswith("- Stack vs one-at-a-time baseline") and "5.00x the requests/s" in line
        for line in lines
    )
    # The vLLM server runs one engine on every core against pinned replicas: no ratio is taken to it.
    assert not any("vLLM" in line for line in lines)
    assert any("least_conn vs round robin: p95 600 ms vs 1200 ms (0.50x)" in line for line in lines)
    assert any(line.startswith("- Chaos: 0 failed of 300 requests") for line in lines)
    assert any("(stack): 10 req/s" in line for line in lines)


def test_quick_plan_is_smaller_than_the_full_one() -> None:
    full, quick = Plan(), Plan.quick()
    assert quick.ramp_vus < full.ramp_vus and quick.pass_iterations < full.pass_iterations
    assert set(quick.baselines) <= set(full.baselines) and names.STEP_SERIAL in quick.baselines
    assert set(full.baselines) <= set(names.STEPS)


def test_ratio_table_gives_every_figure_against_the_baseline() -> None:
    setup, base = result(rate=20.0, p95=1000.0, tokens=400.0), result(rate=10.0, p95=4000.0, tokens=100.0)
    header, _, line = ratio_table([("stack / one-at-a-time", setup, base)]).splitlines()
    assert header == "| comparison | req/s | gen tok/s | p50 | p90 | p95 | p99 | failed |"
    assert line == "| stack / one-at-a-time | 2.00x | 4.00x | 0.25x | 0.25x | 0.25x | 0.25x | 0 vs 0 |"


def test_comparisons_take_ratios_to_equal_resources_only() -> None:
    """The stack to the one-at-a-time baseline (both on the whole machine); never to the vLLM server,
    one engine on every core against pinned replicas, in the ramp or the open loop."""
    serial, vllm, stack = result(rate=1.0), result(rate=2.0), result(rate=3.0)
    baselines = {names.SERIAL: serial, names.VLLM: vllm}
    ramp = [Row(names.SERIAL, serial), Row(names.VLLM, vllm), Row(names.STACK, stack)]
    assert [(label, r, base) for label, r, base in comparisons(names.RAMP, ramp, baselines)] == [
        ("stack / one-at-a-time", stack, serial),
    ]
    v10, v20, s10, s20, s40 = (result(rate=float(i)) for i in range(5))
    rate = [Row(names.VLLM, v10, 10.0), Row(names.VLLM, v20, 20.0)]
    rate += [Row(names.STACK, s10, 10.0), Row(names.STACK, s20, 20.0), Row(names.STACK, s40, 40.0)]
    assert comparisons(names.RATE, rate, baselines) == []
    assert comparisons(names.CHAOS, [Row(names.KILLED, stack, 4.0)], baselines) == []


@pytest.mark.parametrize(
    ("hardware", "where", "starts"),
    [
        (Hardware(), "CPU only", "On CPU every setup starts at once"),
        (Hardware(("0", "1")), "GPUs 0, 1", "On GPUs the setups start one at a time"),
    ],
)
def test_the_report_says_where_it_ran_and_what_sampling_it_sent(
    hardware: Hardware, where: str, starts: str, tmp_path: Path
) -> None:
    b = Bench(Plan.quick(), tmp_path, tmp_path / "model", tmp_path / "items.json", "k6", HUNYUAN_SAMPLING)
    b.notes.append(GPU_UNEQUAL_SKIPPED)
    text = write_report(b, tmp_path / "out", {"stack": 1.0}, quick=True, hardware=hardware).read_text()
    assert f"cores, {where}; model `model`" in text
    assert starts in text and f"- {GPU_UNEQUAL_SKIPPED}" in text
    assert "temperature 0.7, top_p 0.6, top_k 20, repetition_penalty 1.05." in text
    assert "- (no complete comparison in this run)" in text

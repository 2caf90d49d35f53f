"""The burst question's figures: statuses counted, the nearest-rank percentiles, the report's rows."""

from __future__ import annotations

import argparse

import pytest

from bench.burst import percentile, report, summarize


@pytest.mark.parametrize(
    ("values", "share", "expected"),
    [([], 0.5, 0.0), ([3.0], 0.95, 3.0), ([1.0, 2.0, 3.0, 4.0], 0.5, 2.0), ([*range(1, 101)], 0.95, 95)],
)
def test_nearest_rank_percentiles(values: list[float], share: float, expected: float) -> None:
    assert percentile(values, share) == expected


def test_statuses_split_into_answered_refused_and_failed() -> None:
    outcomes = [("200", 1.0), ("200", 3.0), ("503", 0.01), ("429", 0.02), ("ReadTimeout", 600.0)]
    burst = summarize("stack", "script", outcomes, 4.5)
    assert (burst.k, burst.answered, burst.refused, burst.failed) == (5, 2, 2, 1)
    assert (burst.p50_s, burst.max_s, burst.wall_s) == (1.0, 3.0, 4.5)  # answered ones' latencies only
    assert burst.statuses == {"200": 2, "503": 1, "429": 1, "ReadTimeout": 1}


def test_the_report_compares_wall_times_per_k() -> None:
    bursts = [
        summarize("stack", "script", [("200", 1.0)] * 3, 13.0),
        summarize("vllm", "script", [("200", 1.0)] * 3, 10.0),
        summarize("stack", "openai", [("200", 1.0)] * 3, 12.0),
    ]
    text = report(bursts, argparse.Namespace(k=[3, 7], max_tokens=16))
    assert "- K = 3: stack wall time / vLLM's, the script: 1.30x" in text
    assert "- K = 7: stack wall time / vLLM's, the script: n/a" in text
    assert "| stack | openai | 3 | 3 | 0 | 0 | 1.00 | 1.00 | 1.00 | 12.0 |" in text

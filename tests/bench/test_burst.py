"""The burst question's figures: statuses counted, the nearest-rank percentiles, the report's rows."""

from __future__ import annotations

import argparse

import pytest

from bench.burst import Person, percentile, report, summarize
from bench.burst_kill import Killed, describe


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


def test_the_report_gives_a_persons_p50_during_the_burst_against_idle() -> None:
    burst = summarize("stack", "script, bulk key", [("200", 1.0), ("503", 0.01)], 9.0)
    person = Person(k=2, idle_p50_s=0.4, during_p50_s=0.5, during_count=12, burst=burst)
    text = report([], argparse.Namespace(k=[2], max_tokens=16), person)
    assert "p50 0.40 s idle, 0.50 s (1.25x) over 12 strings while a bulk key sent 2 at once" in text
    assert "{'200': 1, '503': 1} in 9.0 s" in text


def test_the_report_says_what_the_kill_step_killed_and_its_burst_row() -> None:
    killed = Killed(pid=42, in_flight=600, queued=344, at_s=3.25)
    burst = summarize("stack", "script, kill -9", [("200", 2.0)] * 4, 20.0)
    text = report([burst], argparse.Namespace(k=[4], max_tokens=16), None, describe(killed, 4))
    assert "kill -9 of replica pid 42 3.2 s into the burst of 4, holding 600 requests admitted" in text
    assert "| stack | script, kill -9 | 4 | 4 | 0 | 0 |" in text
    assert "nothing killed" in describe(None, 4)

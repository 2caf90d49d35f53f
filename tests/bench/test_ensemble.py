"""bench/ensemble.py's pure parts: the strings of each round, the report's lines."""

from __future__ import annotations

import argparse

from bench.ensemble import Round, parse_args, report, strings


def test_rounds_get_distinct_strings() -> None:
    first, second = strings(10, 0), strings(10, 10)
    assert len(set(first + second)) == 20 and all(s.strip() for s in first)


def test_report_gives_both_kinds_and_their_ratio() -> None:
    args: argparse.Namespace = parse_args(["--rounds", "1", "--requests", "10"])
    rounds = [Round("single", 10, 2.0, 100.0, 200.0, 0, 0), Round("ensemble", 10, 5.0, 300.0, 500.0, 0, 1)]
    text = report(rounds, args)
    assert "| single | 5.0 | 200 | 0 | - |" in text and "| ensemble | 2.0 | 500 | 0 | 1 |" in text
    assert "0.40x the requests/s, 2.50x the p95" in text

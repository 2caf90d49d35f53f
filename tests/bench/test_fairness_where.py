"""bench/fairness_where.py: the person's latencies split by the replicas' access-log lines."""

from __future__ import annotations

import json
from pathlib import Path

from bench.fairness_where import Split, access_lines, split, where_lines


def _line(rid: str, latency: float, engine: float, queue: float) -> str:
    return json.dumps({"request_id": rid, "latency_ms": latency, "engine_ms": engine, "queue_ms": queue})


def test_each_part_is_the_median_of_the_strings_the_replicas_logged(tmp_path: Path) -> None:
    (tmp_path / "replica-0.log").write_text(
        "INFO:     Started server process\n"  # not an access line
        + _line("a", 30.0, 20.0, 1.0) + "\n"
        + '{"event": "engine", "request_id": "x"}\n'  # JSON, but no latency: not an access line
        + "{not json\n"
    )  # fmt: skip
    (tmp_path / "replica-1.log").write_text(_line("b", 50.0, 35.0, 3.0) + "\n" + _line("c", 40.0, 30.0, 2.0))
    (tmp_path / "up.log").write_text(_line("d", 1.0, 1.0, 1.0))  # not a replica's log
    access = access_lines(tmp_path)
    assert sorted(access) == ["a", "b", "c"]
    traces = [(40.0, "a"), (70.0, "b"), (48.0, "c"), (99.0, "missing")]
    assert split(traces, access) == Split(
        joined=3, client=48.0, outside=10.0, replica=40.0, around=10.0, engine=30.0, queued=2.0
    )
    assert split([], access) == Split(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def test_the_report_table_has_a_row_per_phase_and_nothing_without_figures() -> None:
    rows = where_lines({"idle": Split(3, 48.0, 10.0, 40.0, 10.0, 30.0, 2.0)})
    assert "| idle | 3 | 48.0 | 10.0 | 40.0 | 10.0 | 30.0 | 2.0 |" in rows
    assert where_lines({}) == []

"""tests/support/ahead.py: which runs a selection plans, and how a run's answer or failure is read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.ahead import MARKER, OfflineRun, planned


class _Item:
    def __init__(self, marker: Any) -> None:
        self.marker = marker

    def get_closest_marker(self, name: str) -> Any:
        return self.marker if name == MARKER else None


def _jobs_a(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return [{"model": "a"}]


def _jobs_b(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return [{"model": "b"}]


def test_planned_names_each_marked_run_once_in_the_order_met() -> None:
    items = [
        _Item(None),
        _Item(pytest.mark.offline_ahead("b", _jobs_b).mark),
        _Item(pytest.mark.offline_ahead("a", _jobs_a).mark),
        _Item(pytest.mark.offline_ahead("b", _jobs_b).mark),
    ]
    assert planned(items) == {"b": _jobs_b, "a": _jobs_a}  # type: ignore[arg-type]
    assert planned([_Item(None)]) == {}  # type: ignore[list-item]


def _run(tmp_path: Path, code: str) -> OfflineRun:
    out, log = tmp_path / "run.out", tmp_path / "run.log"
    with out.open("wb") as stdout, log.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=stdout, stderr=stderr)
    return OfflineRun(proc, out, log)


def test_the_answer_is_the_last_line(tmp_path: Path) -> None:
    run = _run(tmp_path, "print('loading'); print('[{\"texts\": [\"删除\"]}]')")
    assert run.results(30) == [{"texts": ["删除"]}]


def test_a_failed_run_fails_the_test_with_its_log(tmp_path: Path) -> None:
    run = _run(tmp_path, "import sys; sys.stderr.write('engine died'); sys.exit(3)")
    with pytest.raises(AssertionError, match="exited 3:\nengine died"):
        run.results(30)


def test_a_run_past_its_time_is_killed(tmp_path: Path) -> None:
    run = _run(tmp_path, "import time; time.sleep(60)")
    with pytest.raises(pytest.fail.Exception, match="not done within 0 s"):
        run.results(0.2)
    assert run.proc.poll() is not None

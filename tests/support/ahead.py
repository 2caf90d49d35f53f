"""Offline-engine runs a heavy module needs, started at the session's start beside the light tests.

A module marks itself `pytest.mark.offline_ahead(name, jobs)`, where `jobs(request)` builds the job
list of tests/support/offline_engine.py (fixtures may be asked for through `request`). When a test of
such a module is selected, the root conftest starts that run in a child process before the first
test, and the module's fixture takes its results (`OfflineRuns.results`), waiting if it is still going.
The engine starts and loads while the light modules run on the other core, instead of in the module's
own setup after them (light_modules_first puts the heavy modules last).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MARKER = "offline_ahead"
REPO = Path(__file__).resolve().parents[2]
Jobs = list[dict[str, Any]]
JobsFor = Callable[[pytest.FixtureRequest], Jobs]


@dataclass
class OfflineRun:
    """One child process of tests.support.offline_engine on a job file; its last stdout line is the answer."""

    proc: subprocess.Popen[bytes]
    out: Path
    log: Path

    def results(self, timeout_s: float) -> Jobs:
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"offline engine run not done within {timeout_s:.0f} s; see {self.log}")
        log = self.log.read_text(encoding="utf-8", errors="replace")
        assert code == 0, f"offline engine run exited {code}:\n{log[-3000:]}"
        lines = self.out.read_text(encoding="utf-8").strip().splitlines()
        assert lines, f"offline engine run printed nothing:\n{log[-3000:]}"
        answer: Jobs = json.loads(lines[-1])
        return answer

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)


class OfflineRuns:
    """The session's runs by name: started ahead, or at the first ask when nothing started them."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.runs: dict[str, OfflineRun] = {}

    def start(self, name: str, jobs: Jobs) -> None:
        if name in self.runs:
            return
        jobs_path, out, log = (self.work / f"{name}{suffix}" for suffix in (".json", ".out", ".log"))
        jobs_path.write_text(json.dumps(jobs, ensure_ascii=False), encoding="utf-8")
        argv = [sys.executable, "-m", "tests.support.offline_engine"]
        with jobs_path.open("rb") as stdin, out.open("wb") as stdout, log.open("wb") as stderr:
            proc = subprocess.Popen(
                argv, stdin=stdin, stdout=stdout, stderr=stderr, cwd=REPO, start_new_session=True
            )
        self.runs[name] = OfflineRun(proc, out, log)

    def results(self, name: str, jobs: Jobs, timeout_s: float = 600.0) -> Jobs:
        """The run's answer, one per job; `jobs` start it here when the session did not."""
        self.start(name, jobs)
        return self.runs[name].results(timeout_s)

    def stop(self) -> None:
        for run in self.runs.values():
            run.stop()


def planned(items: list[pytest.Item]) -> dict[str, JobsFor]:
    """Each run a selected test's module marks (name -> its job builder), in the order first met."""
    found: dict[str, JobsFor] = {}
    for item in items:
        marker = item.get_closest_marker(MARKER)
        if marker is not None:
            name, jobs_for = marker.args
            found.setdefault(name, jobs_for)
    return found

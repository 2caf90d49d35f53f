"""vLLM's scheduler with the bulk width: which bulk a step leaves out, the budget of a step without a
person, and the width file it reads."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from hunyuan_serve.replica.engine.interface import EngineStats
from hunyuan_serve.replica.engine.people_scheduler import paused_and_held, step_budget
from hunyuan_serve.replica.engine.width_file import UNLIMITED, Ack, WidthReader, WidthWriter


@dataclass(frozen=True)
class Req:
    name: str
    priority: int


def reqs(spec: str) -> list[Req]:
    """'p b b' -> a person's request, then two bulk ones, named by position (p0, b1, b2)."""
    return [Req(f"{kind}{n}", 0 if kind == "p" else 1) for n, kind in enumerate(spec.split())]


def names(requests: list[Req]) -> list[str]:
    return [r.name for r in requests]


# (running, waiting, width, paused, held)
CASES = [
    ("b b b", "", 0, [], []),  # no person in the engine: nothing is left out, whatever the width
    ("b b b", "b", 1, [], []),
    ("b b b p", "", 1, ["b1", "b2"], []),  # a person running: the first bulk goes on, the rest pause
    ("b b b p", "", 0, ["b0", "b1", "b2"], []),  # a probe: no bulk beside the person
    ("b b b", "p b", 2, ["b2"], ["b1"]),  # a person waiting counts too; waiting bulk is held
    ("b b p", "", 5, [], []),  # the width holds all the running bulk
    ("b b b p", "b", UNLIMITED, [], []),  # no width written yet: vLLM's own scheduling
    ("p p", "", 0, [], []),  # people only
    ("b p", "b b", 2, [], ["b1"]),  # room under the width: the oldest waiting bulk starts beside them
    ("b b p", "b b", 24, [], []),  # the full width (interactive_window_s 0): nothing is left out
]


@pytest.mark.parametrize(("running", "waiting", "width", "paused", "held"), CASES)
def test_a_step_with_a_person_leaves_the_bulk_over_the_width_out(
    running: str, waiting: str, width: int, paused: list[str], held: list[str]
) -> None:
    got = paused_and_held(reqs(running), [Req(f"w{r.name}", r.priority) for r in reqs(waiting)], width)
    assert names(got[0]) == paused and [n[1:] for n in names(got[1])] == held


# (vLLM's budget, running sequences, prompt tokens, the step's budget)
BUDGETS = [
    (2048, 96, 128, 224),  # the job's next tokens, and 128 of new prompts
    (2048, 0, 128, 128),  # nothing running: new prompts only
    (2048, 3000, 128, 2048),  # never over vLLM's own budget
    (512, 96, 1280, 512),  # a wider width's prompts: vLLM's budget is the limit
    (2048, 96, 0, 96),  # a width of 0 is asked for as one width's worth (WidthRule), never 0 here
]


@pytest.mark.parametrize(("budget", "running", "prompt_tokens", "expected"), BUDGETS)
def test_a_step_without_a_person_starts_few_new_prompts_while_the_width_is_narrow(
    budget: int, running: int, prompt_tokens: int, expected: int
) -> None:
    assert step_budget(budget, running, prompt_tokens) == expected


def test_the_width_file_carries_the_latest_limits_to_another_reader(tmp_path: Path) -> None:
    writer = WidthWriter(tmp_path)
    reader = WidthReader(writer.path)  # the engine core opens it once, at its scheduler's start
    assert reader.read() == (UNLIMITED, UNLIMITED)
    for width, prompt_tokens in ((0, 128), (4, 512), (192, None), (3, 384)):
        writer.write(width, prompt_tokens)
        assert reader.read() == (width, UNLIMITED if prompt_tokens is None else prompt_tokens)
    writer.close()
    assert not writer.path.exists()
    assert WidthReader(writer.path).read() == (UNLIMITED, UNLIMITED)  # gone: vLLM's own scheduling
    assert WidthReader(tmp_path / "never-made").read() == (UNLIMITED, UNLIMITED)


def test_the_scheduler_acknowledges_each_step_in_its_half_of_the_file(tmp_path: Path) -> None:
    writer = WidthWriter(tmp_path)
    reader = WidthReader(writer.path)
    assert writer.acknowledged() == Ack()  # nothing built yet
    reader.built()
    assert writer.acknowledged() == Ack(os.getpid(), 0, UNLIMITED)
    writer.write(3, 64)
    reader.acknowledge(reader.read()[0])
    reader.acknowledge(reader.read()[0])
    assert writer.acknowledged() == Ack(os.getpid(), 2, 3)
    assert reader.read() == (3, 64)  # the acknowledgements leave the replica's half alone
    writer.write(5)
    assert writer.acknowledged().steps == 2  # and the width leaves the scheduler's
    writer.close()
    assert writer.acknowledged() == Ack()


def _stats(acks: int, logged_steps: int) -> EngineStats:
    stats = EngineStats(steps=logged_steps)
    stats.acknowledged = lambda: Ack(1, acks, 4)
    return stats


# (acknowledged steps, the stat logger's steps, a deep probe stepped, people_first, the stall clock)
PEOPLE_FIRST = [
    (0, 0, False, "unproven", 0),  # no step yet: nothing to acknowledge
    (0, 0, True, "inactive", 0),  # a probe generated, and no step was acknowledged
    (0, 5, False, "inactive", 5),  # the stat logger saw steps: the clock falls back to its count
    (7, 5, False, "active", 7),  # ours once it moves: a throttled stat logger cannot stop the clock
    (7, 0, True, "active", 7),
]


@pytest.mark.parametrize(("acks", "logged", "stepped", "state", "clock"), PEOPLE_FIRST)
def test_people_first_is_inactive_once_the_engine_stepped_with_nothing_acknowledged(
    acks: int, logged: int, stepped: bool, state: str, clock: int
) -> None:
    stats = _stats(acks, logged)
    assert stats.people_first(stepped) == state
    assert stats.people_first_inactive(stepped) is (state == "inactive")
    assert stats.clock() == clock


def test_an_engine_without_a_pausing_scheduler_has_no_people_first_state() -> None:
    stats = EngineStats(steps=9)  # the stand-in's
    assert stats.people_first(True) is None and not stats.people_first_inactive(True)
    assert stats.clock() == 9


def test_a_new_writer_removes_the_files_of_replicas_that_are_gone(tmp_path: Path) -> None:
    # A replica killed with -9 leaves its file; the next replica's writer removes it, not a live one's.
    # Files of another pid namespace (a container sharing /dev/shm) are left: their pids mean nothing here.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ns = f"ns{os.stat('/proc/self/ns/pid').st_ino}-"
    orphan = tmp_path / f"hunyuan-bulk-width-{ns}{dead.pid}-abc123"
    elsewhere = tmp_path / f"hunyuan-bulk-width-ns1-{dead.pid}-abc123"
    other = tmp_path / "unrelated-file"
    for path in (orphan, elsewhere, other):
        path.write_bytes(b"\0" * 8)
    live = WidthWriter(tmp_path)
    assert not orphan.exists() and elsewhere.exists() and other.exists()
    writer = WidthWriter(tmp_path)
    assert live.path.exists() and writer.path.exists()
    assert writer.path.name.startswith(f"hunyuan-bulk-width-{ns}{os.getpid()}-")
    live.close()
    writer.close()

"""Table tests of the replica's liveness: the stall rule, the lifecycle moves and the health reading."""

from __future__ import annotations

import pytest

from hunyuan_serve.replica.lifecycle import InvalidTransition, Lifecycle, Phase, ReportedHealth, read_health
from hunyuan_serve.replica.liveness import ProgressWatch

# Each history: the (engine steps, unfinished requests, seconds) of successive checks -> stall seen.
HISTORIES = {
    "idle for long, then work arrives: the clock starts at that check": (
        [(5, 0, 0.0), (5, 0, 600.0), (5, 1, 601.0), (5, 1, 604.0)],
        [0.0, 0.0, 0.0, 3.0],
    ),
    "busy and stepping: never stalled": (
        [(1, 2, 0.0), (9, 2, 5.0), (20, 3, 10.0), (31, 1, 15.0)],
        [0.0, 0.0, 0.0, 0.0],
    ),
    "work and no step: the stall grows from the first check that saw it": (
        [(7, 1, 0.0), (8, 1, 1.0), (8, 1, 2.5), (8, 2, 9.0)],
        [0.0, 0.0, 1.5, 8.0],
    ),
    "a step resets the clock": (
        [(3, 1, 0.0), (3, 1, 10.0), (4, 1, 11.0), (4, 1, 12.0)],
        [0.0, 10.0, 0.0, 1.0],
    ),
    "work finished without a new step (the last step finished it): idle resets": (
        [(3, 1, 0.0), (3, 1, 4.0), (3, 0, 5.0), (3, 1, 50.0), (3, 1, 51.0)],
        [0.0, 4.0, 0.0, 0.0, 1.0],
    ),
}


@pytest.mark.parametrize("name", list(HISTORIES))
def test_stall_rule(name: str) -> None:
    checks, expected = HISTORIES[name]
    watch = ProgressWatch()
    assert [watch.stalled_s(steps, unfinished, now) for steps, unfinished, now in checks] == expected


# -- the lifecycle: its transition table and the health reading derived from it ---------------

ALL_MOVES = [(start, to) for start in Phase for to in Phase]
ALLOWED = {
    (Phase.LOADING, Phase.WARMING),
    (Phase.LOADING, Phase.FAILED),
    (Phase.WARMING, Phase.READY),
    (Phase.WARMING, Phase.FAILED),
}


def _at(phase: Phase) -> Lifecycle:
    lifecycle = Lifecycle()
    path = {
        Phase.LOADING: [],
        Phase.WARMING: [Phase.WARMING],
        Phase.READY: [Phase.WARMING, Phase.READY],
        Phase.FAILED: [Phase.FAILED],
    }
    for step in path[phase]:
        lifecycle.move(step)
    return lifecycle


@pytest.mark.parametrize(("start", "to"), ALL_MOVES, ids=[f"{a.value}->{b.value}" for a, b in ALL_MOVES])
def test_lifecycle_moves_only_forward(start: Phase, to: Phase) -> None:
    lifecycle = _at(start)
    if (start, to) in ALLOWED:
        lifecycle.move(to, "why")
        assert (lifecycle.phase, lifecycle.reason) == (to, "why")
    else:
        with pytest.raises(InvalidTransition, match=f"from {start.value} to {to.value}"):
            lifecycle.move(to)
        assert lifecycle.phase is start


def test_a_new_lifecycle_is_loading_with_a_reason() -> None:
    lifecycle = Lifecycle()
    assert (lifecycle.phase, lifecycle.loading, lifecycle.ready) == (Phase.LOADING, True, False)
    assert lifecycle.reason == "model loading"
    lifecycle.move(Phase.WARMING)
    assert (lifecycle.loading, lifecycle.reason) == (False, "first translation running")
    lifecycle.move(Phase.READY)
    assert (lifecycle.ready, lifecycle.reason) == (True, "")


# (phase, engine alive, seconds stalled, unfinished, stall_timeout_s) -> health, words in the reason
READINGS = {
    "loading says so, whatever the engine shows": (
        (Phase.LOADING, False, 99.0, 1, 5.0),
        ReportedHealth.LOADING,
        "x",
    ),
    "warming says so": ((Phase.WARMING, True, 0.0, 1, 5.0), ReportedHealth.WARMING, "x"),
    "failed keeps its reason, even with a live engine": (
        (Phase.FAILED, True, 0.0, 0, 5.0),
        ReportedHealth.FAILED,
        "x",
    ),
    "ready and moving": ((Phase.READY, True, 4.9, 1, 5.0), ReportedHealth.READY, ""),
    "ready, engine loop gone: dead": (
        (Phase.READY, False, 0.0, 0, 5.0),
        ReportedHealth.DEAD,
        "engine loop stopped",
    ),
    "dead wins over hung": ((Phase.READY, False, 60.0, 2, 5.0), ReportedHealth.DEAD, "engine loop stopped"),
    "stalled to the limit: hung": (
        (Phase.READY, True, 5.0, 2, 5.0),
        ReportedHealth.HUNG,
        "no step for 5s with 2",
    ),
    "stall rule off (0)": ((Phase.READY, True, 600.0, 2, 0.0), ReportedHealth.READY, ""),
}


@pytest.mark.parametrize("name", list(READINGS))
def test_health_reading(name: str) -> None:
    (phase, alive, stalled, unfinished, timeout), health, words = READINGS[name]
    reading = read_health(phase, "x", alive, stalled, unfinished, timeout)
    assert reading.health is health and reading.ok == (health is ReportedHealth.READY)
    if words:
        assert words in reading.reason
    else:
        assert reading.reason == ""


def test_every_phase_reads_as_the_health_of_the_same_name() -> None:
    assert {phase.value for phase in Phase} < {health.value for health in ReportedHealth}

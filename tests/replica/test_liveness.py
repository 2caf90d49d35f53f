"""Table tests of the stall rule: scripted histories of (steps, unfinished, time) checks."""

from __future__ import annotations

import pytest

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

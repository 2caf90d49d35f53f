"""Table tests of the replica state machine: scripted observations, expected states and actions."""

from __future__ import annotations

import pytest

from hunyuan_serve.config import SupervisorConfig
from hunyuan_serve.run import health
from hunyuan_serve.run.health import Abandon, Exited, Kill, Probe, Reroute, Start, State, Tick

CFG = SupervisorConfig(
    unhealthy_threshold=3,
    startup_timeout_s=100.0,
    restart_backoff_base_s=1.0,
    restart_backoff_max_s=8.0,
    restart_backoff_jitter=0.5,
    crash_loop_budget=3,
    crash_loop_window_s=60.0,
    abandon_after_s=30.0,
)

OK, BAD = True, False

# Each step: (observation, expected state, expected action kinds).
HISTORIES: dict[str, list[tuple[health.Observation, State, list[type]]]] = {
    "boot then ready": [
        (Tick(0), State.STARTING, [Start]),
        (Probe(1, BAD, "refused"), State.STARTING, []),
        (Probe(2, BAD, "loading"), State.STARTING, []),
        (Probe(3, OK), State.READY, [Reroute]),
        (Probe(4, OK), State.READY, []),
    ],
    "exit while ready: evicted at once, restarted after backoff": [
        (Tick(0), State.STARTING, [Start]),
        (Probe(1, OK), State.READY, [Reroute]),
        (Exited(5, -9), State.RESTARTING, [Reroute]),
        (Tick(5.5), State.RESTARTING, []),  # backoff 1 s not yet over
        (Tick(6.0), State.STARTING, [Start]),
        (Probe(7, OK), State.READY, [Reroute]),
    ],
    "hung: unhealthy, then evicted and killed at the threshold": [
        (Tick(0), State.STARTING, [Start]),
        (Probe(1, OK), State.READY, [Reroute]),
        (Probe(2, BAD, "timeout"), State.UNHEALTHY, []),
        (Probe(3, BAD, "timeout"), State.UNHEALTHY, []),
        (Probe(4, BAD, "timeout"), State.EVICTED, [Reroute, Kill]),
        (Probe(4.5, OK), State.EVICTED, []),  # a late answer changes nothing
        (Exited(4.6, -9), State.RESTARTING, []),
        (Tick(5.0), State.STARTING, [Start]),
    ],
    "one failed probe then recovery": [
        (Tick(0), State.STARTING, [Start]),
        (Probe(1, OK), State.READY, [Reroute]),
        (Probe(2, BAD, "timeout"), State.UNHEALTHY, []),
        (Probe(3, OK), State.READY, []),
        (Probe(4, BAD, "timeout"), State.UNHEALTHY, []),
        (Probe(5, BAD, "timeout"), State.UNHEALTHY, []),  # counter restarted after the recovery
    ],
    "startup deadline": [
        (Tick(0), State.STARTING, [Start]),
        (Tick(99), State.STARTING, []),
        (Tick(100), State.EVICTED, [Kill]),
        (Exited(100.1, -9), State.RESTARTING, []),
    ],
    "a killed replica that never exits is abandoned and a new one started": [
        (Tick(0), State.STARTING, [Start]),
        (Tick(100), State.EVICTED, [Kill]),  # restart_at 101 (backoff 1 s) is already set
        (Tick(129.9), State.EVICTED, []),
        (Tick(130), State.RESTARTING, [Abandon]),
        (Tick(130.1), State.STARTING, [Start]),
        (Exited(131, 1), State.RESTARTING, []),  # the new process exits: a failure like any other
    ],
    "exit before ready is a failure without a reroute": [
        (Tick(0), State.STARTING, [Start]),
        (Exited(2, 1), State.RESTARTING, []),
    ],
    "crash loop ends in failed; nothing moves it after": [
        (Tick(0), State.STARTING, [Start]),
        (Exited(1, 1), State.RESTARTING, []),
        (Tick(2), State.STARTING, [Start]),
        (Exited(3, 1), State.RESTARTING, []),
        (Tick(5), State.STARTING, [Start]),  # second backoff is 2 s
        (Exited(6, 1), State.FAILED, []),
        (Tick(1000), State.FAILED, []),
        (Probe(1001, OK), State.FAILED, []),
    ],
    "failures outside the window do not count": [
        (Tick(0), State.STARTING, [Start]),
        (Exited(1, 1), State.RESTARTING, []),
        (Tick(2), State.STARTING, [Start]),
        (Exited(3, 1), State.RESTARTING, []),
        (Tick(5), State.STARTING, [Start]),
        (Probe(6, OK), State.READY, [Reroute]),
        (Exited(100, 1), State.RESTARTING, [Reroute]),  # 1 and 3 fell out of the 60 s window
    ],
    "hung replica at the crash budget fails and is still killed": [
        (Tick(0), State.STARTING, [Start]),
        (Exited(1, 1), State.RESTARTING, []),
        (Tick(2), State.STARTING, [Start]),
        (Exited(3, 1), State.RESTARTING, []),
        (Tick(5), State.STARTING, [Start]),
        (Probe(6, OK), State.READY, [Reroute]),
        (Probe(7, BAD), State.UNHEALTHY, []),
        (Probe(8, BAD), State.UNHEALTHY, []),
        (Probe(9, BAD), State.FAILED, [Reroute, Kill]),
        (Exited(9.1, -9), State.FAILED, []),
    ],
    "observations a state does not expect are ignored": [
        (Exited(0, 0), State.RESTARTING, []),  # nothing running yet
        (Probe(0, OK), State.RESTARTING, []),
        (Tick(0), State.STARTING, [Start]),
    ],
}


@pytest.mark.parametrize("name", list(HISTORIES))
def test_history(name: str) -> None:
    h = health.initial(0.0)
    for i, (obs, state, kinds) in enumerate(HISTORIES[name]):
        h, actions = health.step(h, obs, CFG, rand=0.0)
        assert (h.state, [type(a) for a in actions]) == (state, kinds), f"step {i}: {obs}"


def test_restarts_count_launches_after_the_first() -> None:
    h = health.initial(0.0)
    for obs in (Tick(0), Probe(1, OK), Exited(2, -9), Tick(10), Probe(11, OK), Exited(12, -9), Tick(20)):
        h, _ = health.step(h, obs, CFG)
    assert h.restarts == 2
    assert h.state is State.STARTING


@pytest.mark.parametrize(
    ("attempt", "rand", "expected"),
    [
        (0, 0.9, 0.0),
        (1, 0.0, 1.0),
        (2, 0.0, 2.0),
        (3, 0.0, 4.0),
        (4, 0.0, 8.0),
        (9, 0.0, 8.0),
        (1, 1.0, 1.5),
        (4, 0.5, 10.0),
    ],
)
def test_backoff(attempt: int, rand: float, expected: float) -> None:
    assert health.backoff_delay(attempt, CFG, rand) == pytest.approx(expected)


def test_jitter_from_rand_delays_the_restart() -> None:
    h = health.initial(0.0)
    h, _ = health.step(h, Tick(0), CFG)
    h, _ = health.step(h, Exited(1, 1), CFG, rand=0.999)
    assert h.restart_at == pytest.approx(1 + 1.4995)
    assert health.step(h, Tick(2.4), CFG)[0].state is State.RESTARTING
    assert health.step(h, Tick(2.5), CFG)[0].state is State.STARTING


def test_reasons_name_the_cause() -> None:
    h = health.initial(0.0)
    for obs in (Tick(0), Probe(1, OK), Probe(2, BAD, "timeout"), Probe(3, BAD, "timeout")):
        h, _ = health.step(h, obs, CFG)
    h, _ = health.step(h, Probe(4, BAD, "HTTP 503: dead"), CFG)
    assert h.state is State.EVICTED
    assert "3 failed probe(s)" in h.reason and "HTTP 503: dead" in h.reason

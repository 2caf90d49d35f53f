"""Scripted histories replayed against the real Supervisor loop, on fake processes, probes, Nginx and clock.

No sleeps, no processes, no sockets: the fake clock (tests/support/supervisor_sim.py) wakes sleepers in
deadline order and lets every task run in between, so each history is deterministic and takes milliseconds.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from hunyuan_serve.config import build_config
from hunyuan_serve.run.plan import ReplicaPlan, plan_replicas
from hunyuan_serve.run.procs import SubprocessRunner
from tests.support.fakes import settle
from tests.support.supervisor_sim import Sim, Sims, settings_with


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Callable[..., Sim]]:
    sims = Sims(tmp_path)
    yield sims.make
    await sims.close()  # a failed test leaves its loop running: stop it so nothing outlives the test


R0, R1 = "replica-0", "replica-1"


# -- histories -----------------------------------------------------------------------------------


async def test_boot_admits_each_replica_once_its_health_is_200(make: Callable[..., Sim]) -> None:
    sim = make()
    sim.runner.answer[R1] = "refused"  # still loading
    sim.start()
    await sim.at(3)
    assert sim.story(R0) == ["restarting>starting", "replica_started", "starting>ready", "admitted"]
    assert sim.story(R1) == ["restarting>starting", "replica_started"]
    assert sim.nginx.routed() == [sim.addr(R0)]
    state = sim.state()
    assert state["family"] == "hunyuan" and state["phase"] == "running" and state["nginx"]["ready"] == 1
    # Its timestamps come from the injected clock's wall time (the fake's epoch), not the machine's.
    assert 1_700_000_000.0 <= state["started_at"] <= state["updated_at"] <= 1_700_000_003.0
    assert [(r["state"], r["addr"], r["pid"]) for r in state["replicas"]] == [
        ("ready", sim.addr(R0), sim.runner.latest(R0).pid),
        ("starting", sim.addr(R1), sim.runner.latest(R1).pid),
    ]
    sim.runner.latest(R1).answer = "ok"
    await sim.at(5)
    assert sim.story(R1, since=3) == ["starting>ready", "admitted"]
    assert sim.nginx.routed() == [sim.addr(R0), sim.addr(R1)]
    assert await sim.stop() == 0


async def test_exit_while_starting_restarts_without_touching_nginx(make: Callable[..., Sim]) -> None:
    sim = make()
    sim.runner.answer[R0] = "refused"
    sim.start()
    await sim.at(2)
    first, reloads = sim.runner.latest(R0), list(sim.nginx.reloads)
    first.exit(1)
    await sim.at(4)
    assert sim.story(R0, since=2) == [
        "replica_exited",
        "starting>restarting",
        "restarting>starting",
        "replica_started",
    ]
    assert sim.of(R0, "transition", since=2)[0]["reason"] == "exited with code 1"
    restarted = sim.of(R0, "replica_started", since=2)[0]
    assert restarted["t"] == 3.0 and restarted["pid"] != first.pid  # after the 1 s backoff
    assert sim.nginx.reloads == reloads and sim.of(R0, "evicted") == []  # never routed, nothing to change
    assert await sim.stop() == 0


async def test_the_evicted_event_says_why_it_left_when_the_restart_beats_the_reload(
    make: Callable[..., Sim],
) -> None:
    sim = make()
    sim.start()
    await sim.at(2)
    sim.nginx.reload_s = 2.0  # longer than the 1 s backoff: the replica is launched again first
    sim.runner.latest(R0).exit(-9)
    await sim.at(5)
    assert sim.of(R0, "replica_started", since=2)  # relaunched before Nginx took the eviction
    assert sim.of(R0, "evicted")[0]["reason"] == "exited with code -9"
    assert await sim.stop() == 0


async def test_exit_while_ready_evicts_at_once_then_readmits(make: Callable[..., Sim]) -> None:
    sim = make()
    sim.start()
    await sim.at(2)
    sim.runner.latest(R0).exit(-9)
    await sim.at(2.1)
    assert sim.story(R0, since=2) == ["replica_exited", "ready>restarting", "evicted"]
    assert sim.of(R0, "evicted")[0]["reason"] == "exited with code -9"
    assert sim.nginx.routed() == [sim.addr(R1)]
    await sim.at(4)
    assert sim.story(R0, since=2.5) == [
        "restarting>starting",
        "replica_started",
        "starting>ready",
        "admitted",
    ]
    assert sim.nginx.routed() == [sim.addr(R0), sim.addr(R1)]
    assert sim.state()["replicas"][0]["restarts"] == 1
    assert await sim.stop() == 0


async def test_hung_replica_is_evicted_killed_restarted_and_readmitted(make: Callable[..., Sim]) -> None:
    sim = make()
    sim.start()
    await sim.at(2)
    hung = sim.runner.latest(R1)
    hung.answer = "hang"  # probes from t=3 on time out after 2 s each
    await sim.at(11)
    assert sim.story(R1, since=2) == [
        "ready>unhealthy",  # the first timeout, at t=5
        "unhealthy>evicted",  # the third, at t=11
        "replica_killed",
        "replica_exited",
        "evicted>restarting",
        "evicted",
    ]
    assert sim.of(R1, "transition", since=2)[1]["reason"] == "evicted after 3 failed probe(s): timeout"
    assert sim.runner.killed == [hung.pid] and sim.nginx.routed() == [sim.addr(R0)]
    await sim.at(13)
    assert sim.story(R1, since=11.5) == [
        "restarting>starting",
        "replica_started",
        "starting>ready",
        "admitted",
    ]
    assert sim.nginx.routed() == [sim.addr(R0), sim.addr(R1)]
    assert await sim.stop() == 0


async def test_nginx_that_exits_is_started_again_on_the_current_routing(make: Callable[..., Sim]) -> None:
    sim = make()
    sim.start()
    await sim.at(2)
    sim.runner.latest(R0).answer = "refused"
    sim.runner.latest(R0).exit(-9)  # so the new Nginx must not route to it
    await sim.at(2.1)
    sim.nginx.exit(1)
    await sim.at(2.2)
    exited, started = sim.named("nginx_exited"), sim.named("nginx_started")
    assert [e["returncode"] for e in exited] == [1] and len(started) == 2 and started[1]["ready"] == 1
    assert sim.nginx.starts == 2 and sim.nginx.routed() == [sim.addr(R1)]
    assert sim.named("replica_exited") == [sim.of(R0, "replica_exited")[0]]  # replicas untouched by it
    sim.runner.answer[R0] = "ok"
    await sim.at(5)
    assert sim.nginx.routed() == [sim.addr(R0), sim.addr(R1)]  # and routing goes on as before
    assert await sim.stop() == 0


async def test_nginx_that_cannot_be_started_again_stops_up_with_code_1(make: Callable[..., Sim]) -> None:
    sim = make()
    sim.start()
    await sim.at(2)
    pids = sim.runner.alive()
    sim.nginx.fail_start = "nginx exited with code 1; see error.log"
    sim.nginx.exit(1)
    await sim.at(3)
    assert sim.task is not None and sim.task.done() and sim.task.result() == 1
    assert [e["error"] for e in sim.named("nginx_failed")] == ["nginx exited with code 1; see error.log"]
    assert sorted(sim.runner.stopped) == sorted(pids) and sim.runner.alive() == []
    assert [e["event"] for e in sim.events[-3:]] == ["stopping", "nginx_stopped", "stopped"]
    assert sim.state()["running"] is False


async def test_rejected_config_keeps_the_last_good_one_and_says_why(make: Callable[..., Sim]) -> None:
    sim = make()
    sim.start()
    await sim.at(2)
    good = sim.nginx.text
    sim.nginx.reject = 'unknown directive "bogus"'
    sim.runner.answer[R0] = "refused"  # its next process loads for a while: the routing stays changed
    sim.runner.latest(R0).exit(-9)
    await sim.at(3)
    failed = sim.named("nginx_reload_failed")
    assert [(e["t"], e["error"]) for e in failed] == [
        (2.0, 'nginx -t rejected the config: unknown directive "bogus"')
    ]
    assert sim.nginx.text == good and sim.of(R0, "evicted") == []  # Nginx still routes by the old one
    sim.nginx.reject = None
    await sim.at(5)
    assert [e["t"] for e in sim.of(R0, "evicted")] == [4.0]  # tried again after reload_retry_s
    assert sim.nginx.routed() == [sim.addr(R1)] and len(sim.named("nginx_reload_failed")) == 1
    assert await sim.stop() == 0


async def test_slow_reload_holds_up_no_observation_and_the_latest_routing_wins(
    make: Callable[..., Sim],
) -> None:
    sim = make()
    sim.nginx.reload_s = 10.0  # slower than a dozen probes
    sim.start()
    await sim.at(3)  # the reload that admits both began at t=0
    sim.runner.answer[R1] = "refused"
    sim.runner.latest(R1).exit(-9)
    await sim.at(5)
    sim.runner.latest(R0).exit(-9)
    await sim.at(9)
    # Handled while the reload was in progress: both exits, both restarts, R0 ready again.
    assert [(e["t"], e["to"]) for e in sim.of(R1, "transition", since=1)] == [
        (3.0, "restarting"),
        (4.0, "starting"),
    ]
    assert [(e["t"], e["to"]) for e in sim.of(R0, "transition", since=1)] == [
        (5.0, "restarting"),
        (6.0, "starting"),
        (6.0, "ready"),
    ]
    assert sim.nginx.reloads == [0.0] and sim.named("nginx_reloaded") == []
    await sim.at(21)
    # The routings of t=3 (R0 only) and t=5 (none) were superseded before they were sent.
    assert sim.nginx.reloads == [0.0, 10.0] and sim.nginx.routed() == [sim.addr(R0)]
    assert [(e["t"], e["event"]) for e in sim.of(R1) if e["event"] in ("admitted", "evicted")] == [
        (10.0, "admitted"),
        (20.0, "evicted"),
    ]
    assert await sim.stop() == 0


async def test_replica_that_outlives_sigkill_is_abandoned_and_its_late_exit_dropped(
    make: Callable[..., Sim],
) -> None:
    sim = make()
    sim.start()
    await sim.at(2)
    stuck = sim.runner.latest(R0)
    stuck.answer, stuck.unkillable = "hang", True
    await sim.at(20)
    assert sim.story(R0, since=2)[-3:] == ["unhealthy>evicted", "replica_killed", "evicted"]
    await sim.at(22)
    assert sim.story(R0, since=20) == [
        "evicted>restarting",
        "replica_abandoned",
        "restarting>starting",
        "replica_started",
        "starting>ready",
        "admitted",
    ]
    abandoned = sim.of(R0, "replica_abandoned")[0]
    assert abandoned["t"] == 21.0 and abandoned["pid"] == stuck.pid and "abandoned" in abandoned["reason"]
    fresh = sim.runner.latest(R0)
    assert fresh.pid != stuck.pid and stuck.pid in sim.runner.alive()  # started beside it
    assert sim.state()["replicas"][0]["pid"] == fresh.pid
    stuck.exit(-9)  # the kernel lets go at last: an exit of an earlier generation
    await sim.at(25)
    assert sim.story(R0, since=22) == ["abandoned_exited"]
    assert sim.state()["replicas"][0]["state"] == "ready" and sim.nginx.routed() == [
        sim.addr(R0),
        sim.addr(R1),
    ]
    assert sim.sup is not None and sim.sup.replicas.abandoned == []
    assert await sim.stop() == 0


async def test_kill_during_a_slow_spawn_lands_with_the_process(make: Callable[..., Sim]) -> None:
    sim = make()
    sim.runner.spawn_s[R1] = 40.0  # e.g. before_spawn waiting for the devices' memory
    sim.start()
    await sim.at(31)
    assert sim.story(R1) == ["restarting>starting", "starting>evicted", "replica_kill_pending"]
    assert sim.of(R1, "replica_kill_pending")[0]["reason"] == "not ready within startup_timeout_s=30"
    del sim.runner.spawn_s[R1]
    await sim.at(40.1)
    late = next(p for p in sim.runner.procs if p.name == R1)
    assert late.name == R1 and late.returncode == -9 and sim.runner.killed == [late.pid]
    assert sim.story(R1, since=40) == [
        "replica_started",
        "replica_killed",
        "replica_exited",
        "evicted>restarting",
        "restarting>starting",
        "replica_started",
        "starting>ready",
        "admitted",
    ]
    assert await sim.stop() == 0


async def test_spawn_that_lands_after_its_generation_was_abandoned_is_killed_unseen(
    make: Callable[..., Sim],
) -> None:
    sim = make()
    sim.runner.spawn_s[R1] = 100.0
    sim.start()
    await sim.at(39)
    sim.runner.spawn_s[R1] = 0.0  # the next launch is quick
    await sim.at(41)
    assert sim.story(R1, since=31)[:4] == [
        "evicted>restarting",
        "replica_abandoned",
        "restarting>starting",
        "replica_started",
    ]
    second = sim.runner.latest(R1)
    await sim.at(101)
    first = sim.runner.latest(R1)  # landed at t=100, a generation too late
    assert first is not second and first.returncode == -9 and first.pid in sim.runner.killed
    assert [e["pid"] for e in sim.of(R1, "replica_started")] == [second.pid]
    assert sim.state()["replicas"][1]["pid"] == second.pid and sim.state()["replicas"][1]["state"] == "ready"
    assert await sim.stop() == 0


async def test_failed_spawn_counts_as_a_failure_and_is_retried(make: Callable[..., Sim]) -> None:
    sim = make()
    sim.runner.fail[R1] = "[Errno 2] No such file or directory: 'taskset'"
    sim.start()
    await sim.at(0.1)
    assert sim.story(R1) == ["restarting>starting", "replica_spawn_failed", "starting>restarting"]
    assert sim.of(R1, "replica_spawn_failed")[0]["error"] == "[Errno 2] No such file or directory: 'taskset'"
    assert sim.of(R1, "transition")[1]["reason"] == "could not be started"
    await sim.at(2)
    assert sim.story(R1, since=0.5) == [
        "restarting>starting",
        "replica_started",
        "starting>ready",
        "admitted",
    ]
    assert await sim.stop() == 0


async def test_crash_loop_ends_in_failed_while_the_other_replica_serves(make: Callable[..., Sim]) -> None:
    sim = make()
    sim.runner.answer[R0] = "refused"
    sim.start()
    for t in (1, 3, 6):  # exits before ready; backoff 1, 2 s between them
        await sim.at(t)
        sim.runner.latest(R0).exit(1)
    await sim.at(30)
    failed = sim.of(R0, "transition")[-1]
    assert failed["to"] == "failed" and failed["reason"] == "exited with code 1; crash loop: 3 failures"
    assert len(sim.of(R0, "replica_started")) == 3 and sim.runner.latest(R0).returncode == 1
    assert sim.nginx.routed() == [sim.addr(R1)] and sim.state()["replicas"][0]["state"] == "failed"
    assert await sim.stop() == 0


async def test_shutdown_during_a_restart_starts_nothing_more_and_leaves_no_process(
    make: Callable[..., Sim],
) -> None:
    sim = make()
    sim.start()
    await sim.at(2)
    sim.runner.spawn_s[R1] = 5.0  # its restart is still spawning when the stop comes
    sim.runner.latest(R0).exit(-9)
    sim.runner.latest(R1).exit(-9)
    await sim.at(3.5)
    assert sim.story(R0, since=2)[-1] == "admitted" and sim.story(R1, since=2)[-1] == "restarting>starting"
    running = sim.runner.latest(R0)
    count = len(sim.runner.procs)
    assert await sim.stop() == 0
    await sim.clock.advance_to(60)
    assert len(sim.runner.procs) == count and sim.runner.alive() == []  # the pending spawn never landed
    assert sim.runner.stopped == [running.pid] and sim.nginx.stopped and sim.prober.closed
    assert [e["event"] for e in sim.events[-4:]] == ["signal", "stopping", "nginx_stopped", "stopped"]
    state = sim.state()
    assert state["phase"] == "stopped" and state["running"] is False
    assert [r["pid"] for r in state["replicas"]] == [None, None]


async def test_real_runner_awaits_before_spawn_first(tmp_path: Path) -> None:
    gate = asyncio.Event()
    seen: list[str] = []

    async def before_spawn(plan: ReplicaPlan) -> None:
        seen.append(plan.name)
        await gate.wait()

    cfg = build_config({"replicas": 1}, {})
    plan = plan_replicas(cfg, visible_gpus=[], cores=[0], run_dir=tmp_path, python="python")[0]
    plan = dataclasses.replace(plan, argv=("sh", "-c", "echo started"), cpus=())
    runner = SubprocessRunner(before_spawn)
    spawning = asyncio.create_task(runner.spawn(plan, {"PATH": "/usr/bin:/bin"}))
    await settle()
    assert seen == [plan.name] and not spawning.done() and not plan.log_path.exists()
    gate.set()
    proc = await spawning
    assert await runner.wait(proc) == 0
    assert plan.log_path.read_text() == "started\n"


async def test_logs_past_the_limit_are_rotated_and_nginx_told_to_reopen(make: Callable[..., Sim]) -> None:
    sim = make(
        settings_with({}, logs={"rotate_at_bytes": 1000, "rotate_keep": 2, "rotate_check_interval_s": 30})
    )
    logs = sim.run_dir / "logs"
    logs.mkdir(exist_ok=True)
    (sim.nginx.prefix / "logs").mkdir(parents=True)
    access = sim.nginx.prefix / "logs" / "access.log"
    sim.start()
    await sim.at(5)
    (logs / "replica-0.log").write_bytes(b"x" * 1500)
    (logs / "replica-1.log").write_bytes(b"x" * 10)
    access.write_bytes(b"y" * 1000)
    await sim.at(29)
    assert not sim.named("log_rotated")  # checked every 30 s
    await sim.at(31)
    rotated = {(e["path"], e["bytes"]) for e in sim.named("log_rotated")}
    assert rotated == {(str(logs / "replica-0.log"), 1500), (str(access), 1000)}
    assert sim.nginx.reopened == 1 and (logs / "replica-0.log").stat().st_size == 0
    assert (logs / "replica-1.log").stat().st_size == 10
    assert await sim.stop() == 0

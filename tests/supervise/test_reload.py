"""Rolling reload: the pure rules (tables), and histories replayed against the real Supervisor loop on fakes.

The histories run on tests/support/supervisor_sim.py (fake processes, probes, Nginx, clock): no sleeps,
processes or sockets. The config "file" is a mapping the test edits; the fake Source reads it.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from hunyuan_serve.config import ServeConfig, build_config, resolve_pools
from hunyuan_serve.run import reload_wait
from hunyuan_serve.run.plan import plan_replicas, replica_config
from hunyuan_serve.supervise import reload, status
from tests.support.fakes import FakeSource
from tests.support.supervisor_sim import SETTINGS, Sim, Sims, settings_with

R0, R1 = "replica-0", "replica-1"


# -- the pure rules ------------------------------------------------------------------------------


def _cfg(**changes: Any) -> ServeConfig:
    data = copy.deepcopy(SETTINGS)
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return build_config(data, {})


@pytest.mark.parametrize(
    ("changes", "changed", "refused"),
    [
        ({}, [], []),
        ({"replica__max_tokens": 64}, ["replica.max_tokens"], []),
        ({"engine__model": "/models/b"}, ["engine.model"], []),
        (
            {"supervisor__startup_timeout_s": 5.0, "nginx__max_fails": 2},
            ["nginx.max_fails", "supervisor.startup_timeout_s"],
            [],
        ),
        ({"nginx__port": 8081}, ["nginx.port"], ["nginx.port"]),
        ({"nginx__listen": "0.0.0.0"}, ["nginx.listen"], ["nginx.listen"]),
        ({"replicas": 3}, ["replicas"], ["replicas"]),
        ({"gpus": [0, 1]}, ["gpus"], ["gpus"]),
        ({"run_dir": "/elsewhere"}, ["run_dir"], ["run_dir"]),
        ({"base_port": 9200}, ["base_port"], ["base_port"]),
        (
            {"engine__tensor_parallel_size": 2},
            ["engine.tensor_parallel_size"],
            ["engine.tensor_parallel_size"],
        ),
        (
            {"nginx__port": 8081, "replica__max_tokens": 64},
            ["nginx.port", "replica.max_tokens"],
            ["nginx.port"],
        ),
    ],
)
def test_changed_keys_and_the_restart_only_table(
    changes: dict[str, Any], changed: list[str], refused: list[str]
) -> None:
    old, new = _cfg(), _cfg(**changes)
    assert reload.changed_keys(old, new) == changed
    reasons = reload.refusals(old, new)
    assert [r.split(":")[0] for r in reasons] == refused
    assert all("needs a full restart" in r for r in reasons)


@pytest.mark.parametrize(
    ("setting", "gpus", "order"),
    [
        ("auto", (), "surge"),  # CPU: the new replica starts beside the old one
        ("auto", (0, 1), "drain-first"),  # a GPU holds one engine
        ("surge", (0, 1), "surge"),
        ("drain_first", (), "drain-first"),
    ],
)
def test_replacement_order(setting: str, gpus: tuple[int, ...], order: str, tmp_path: Path) -> None:
    cfg = _cfg()
    plans = plan_replicas(cfg, visible_gpus=list(gpus), cores=[0, 1], run_dir=tmp_path, python="python")
    assert reload.replace_order(setting, plans) == order


def test_ports_alternate_between_two_sets() -> None:
    cfg = _cfg()  # base_port 9100, 2 replicas
    assert [reload.next_port(cfg, i, 9100 + i) for i in (0, 1)] == [9102, 9103]
    assert [reload.next_port(cfg, i, 9102 + i) for i in (0, 1)] == [9100, 9101]
    assert reload.port_refusals(cfg, 2) == []
    assert reload.port_refusals(_cfg(nginx__port=9103), 2) == ["base_port: reload port 9103 is nginx.port"]
    assert reload.port_refusals(_cfg(base_port=65534), 2)[0].startswith("base_port: 65534 leaves no second")


def test_incoming_plan_has_its_port_config_and_log(tmp_path: Path) -> None:
    plan = plan_replicas(_cfg(), visible_gpus=[], cores=[0, 1], run_dir=tmp_path, python="py")[1]
    new = reload.incoming_plan(plan, 9103, 4)
    assert new.port == 9103 and new.addr == "127.0.0.1:9103" and new.device == plan.device
    assert new.config_path == tmp_path / "replica-1.r4.yaml" and new.log_path.name == "replica-1.r4.log"
    assert new.argv == (
        "py",
        "-m",
        "hunyuan_serve",
        "replica",
        "--config",
        str(new.config_path),
        "--port",
        "9103",
    )
    (pool,) = resolve_pools(_cfg())
    assert replica_config(pool, 9103).replica.model_dump()["port"] == 9103


PAIR = {"replica": R0, "old_pid": 10, "new_pid": 20, "old_port": 9100, "new_port": 9102}


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([{"event": "reload_requested", "reload": 3}], None),
        (
            [
                {"event": "reload_requested", "reload": 3},
                {"event": "reload_done", "reload": 3, "replaced": [PAIR], "wall_s": 4.5},
            ],
            (0, "reload 3 done in 4.5 s: replaced replica-0 pid 10 -> 20 (port 9100 -> 9102)"),
        ),
        (
            [{"event": "reload_refused", "reload": 3, "error": "nginx.port: needs a full restart (x)"}],
            (1, "reload 3 refused, nothing was changed: nginx.port: needs a full restart (x)"),
        ),
        (
            [
                {
                    "event": "reload_failed",
                    "reload": 3,
                    "replica": R1,
                    "error": "exited with code 1",
                    "replaced": [PAIR],
                }
            ],
            (
                1,
                "reload 3 failed at replica-1: exited with code 1; replaced before it: "
                "replica-0 pid 10 -> 20 (port 9100 -> 9102)",
            ),
        ),
        ([{"event": "reload_done", "reload": 2, "replaced": []}], None),  # another reload's outcome
    ],
)
def test_outcome_of_one_reload(events: list[dict[str, Any]], expected: tuple[int, str] | None) -> None:
    assert reload.outcome(events, 3) == expected


def test_the_first_reload_requested_after_the_signal_serves_it() -> None:
    events = [
        {"event": "transition"},
        {"event": "reload_requested", "reload": 5},
        {"event": "reload_requested", "reload": 6},
    ]
    assert reload_wait.reload_id(events) == 5 and reload_wait.reload_id([]) is None


# -- histories on the real loop ------------------------------------------------------------------


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Callable[..., tuple[Sim, FakeSource]]]:
    sims = Sims(tmp_path)

    def factory(gpus: Sequence[int] = (), **supervisor: Any) -> tuple[Sim, FakeSource]:
        settings = settings_with(supervisor)
        sim = sims.make(settings, gpus=gpus)
        fake = FakeSource(copy.deepcopy(settings), tmp_path, gpus)
        sim.source = fake.source()
        return sim, fake

    yield factory
    await sims.close()


def _reload_events(sim: Sim) -> list[dict[str, Any]]:
    return [e for e in sim.events if e["event"].startswith("reload_")]


def _ready_counts(sim: Sim, since: float) -> list[int]:
    """How many replicas each config Nginx took from `since` on routed to."""
    return [e["ready"] for e in sim.named("nginx_reloaded") if e["t"] >= since]


async def test_surge_replaces_each_replica_after_its_successor_is_admitted(
    make: Callable[..., tuple[Sim, FakeSource]],
) -> None:
    sim, fake = make()
    sim.start()
    await sim.at(2)
    old = {R0: sim.runner.latest(R0).pid, R1: sim.runner.latest(R1).pid}
    fake.settings["replica"] = {"max_tokens": 64}  # the user edits the file
    fake.settings["nginx"] = {**fake.settings["nginx"], "max_fails": 2}
    assert sim.sup is not None
    sim.sup.request_reload()
    await sim.at(10)
    started = sim.named("reload_started")[0]
    assert started["order"] == "surge" and started["changed"] == ["nginx.max_fails", "replica.max_tokens"]
    assert started["ports"] == [9102, 9103]
    # Each old replica leaves Nginx only after its successor is in it; then it is drained (SIGTERM).
    for name in (R0, R1):
        story = [
            (e["event"], e.get("reload"), e.get("pid"))
            for e in sim.of(name, since=2)
            if e["event"] in ("replica_started", "admitted", "evicted", "replica_draining", "replica_exited")
        ]
        new = next(p for p in sim.runner.procs if p.name == name and p.pid != old[name])
        assert story == [
            ("replica_started", 1, new.pid),
            ("admitted", 1, new.pid),
            ("evicted", None, None),
            ("replica_draining", None, old[name]),
            ("replica_exited", None, old[name]),
        ]
    assert sim.of(R0, "evicted", since=2)[0]["reason"] == "replaced by a reload"
    assert sim.runner.stopped == [old[R0], old[R1]] and sim.runner.killed == []
    # One at a time: replica-1's successor starts only once replica-0's predecessor has exited.
    assert sim.of(R1, "replica_started", since=2)[0]["t"] >= sim.of(R0, "replica_exited", since=2)[0]["t"]
    assert min(_ready_counts(sim, 2)) == 2  # never fewer than two routed during the whole reload
    done = sim.named("reload_done")[0]
    assert [(p["replica"], p["old_pid"], p["old_port"], p["new_port"]) for p in done["replaced"]] == [
        (R0, old[R0], 9100, 9102),
        (R1, old[R1], 9101, 9103),
    ]
    state = sim.state()
    assert [(r["port"], r["config"], r["state"]) for r in state["replicas"]] == [
        (9102, 1, "ready"),
        (9103, 1, "ready"),
    ]
    assert state["incoming"] == [] and state["reload"]["outcome"] == "done"
    written = yaml.safe_load((sim.run_dir / "replica-1.r1.yaml").read_text())
    assert written["replica"]["max_tokens"] == 64 and written["replica"]["port"] == 9103
    assert yaml.safe_load((sim.run_dir / "config.yaml").read_text())["replica"]["max_tokens"] == 64
    # Nginx took the new config's own settings once every replica ran it.
    assert "max_fails=2" in sim.nginx.text and sim.nginx.routed() == ["127.0.0.1:9102", "127.0.0.1:9103"]
    assert sorted(sim.runner.alive()) == sorted(p["new_pid"] for p in done["replaced"])
    assert await sim.stop() == 0


async def test_a_second_reload_moves_back_to_the_first_port_set(
    make: Callable[..., tuple[Sim, FakeSource]],
) -> None:
    sim, fake = make()
    sim.start()
    await sim.at(2)
    assert sim.sup is not None
    fake.edit()
    sim.sup.request_reload()
    await sim.at(10)
    fake.edit()
    sim.sup.request_reload()
    await sim.at(20)
    assert [e["reload"] for e in sim.named("reload_done")] == [1, 2]
    assert [(r["port"], r["config"]) for r in sim.state()["replicas"]] == [(9100, 2), (9101, 2)]
    assert sim.nginx.routed() == ["127.0.0.1:9100", "127.0.0.1:9101"] and len(sim.runner.alive()) == 2
    assert await sim.stop() == 0


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (
            {"read_error": "invalid config: replica.max_tokens: Input should be a valid integer"},
            "invalid config: replica.max_tokens",
        ),
        ({"settings": {"nginx": {"port": 8081}}}, "nginx.port: needs a full restart"),
        ({"settings": {"replicas": 3}}, "replicas: needs a full restart"),
        ({"prepare_error": "model /models/b: no such directory"}, "model /models/b: no such directory"),
        (
            {"busy": {9103: "port 9103 on 127.0.0.1 is in use by pid 77 (x)"}},
            "port 9103 on 127.0.0.1 is in use by pid 77",
        ),
    ],
)
async def test_a_config_that_cannot_be_applied_is_refused_and_nothing_is_touched(
    make: Callable[..., tuple[Sim, FakeSource]], edit: dict[str, Any], error: str
) -> None:
    sim, fake = make()
    sim.start()
    await sim.at(2)
    procs, reloads, text = list(sim.runner.procs), list(sim.nginx.reloads), sim.nginx.text
    fake.edit()  # and something every replica reads, so that a refusal is what keeps them
    for key, value in edit.items():
        setattr(fake, key, {**fake.settings, **value} if key == "settings" else value)
    assert sim.sup is not None
    sim.sup.request_reload()
    await sim.at(5)
    assert [e["event"] for e in _reload_events(sim)] == ["reload_requested", "reload_refused"]
    assert error in sim.named("reload_refused")[0]["error"]
    assert sim.runner.procs == procs and sim.runner.stopped == [] and sim.runner.killed == []
    assert sim.nginx.reloads == reloads and sim.nginx.text == text
    assert sim.state()["reload"]["outcome"] == "refused"
    assert not (sim.run_dir / "replica-0.r1.yaml").exists()
    assert await sim.stop() == 0


async def test_a_new_replica_that_never_gets_ready_stops_the_reload_and_the_old_keeps_serving(
    make: Callable[..., tuple[Sim, FakeSource]],
) -> None:
    sim, fake = make()
    sim.start()
    await sim.at(2)
    old = sim.runner.latest(R0)
    sim.runner.answer[R0] = "refused"  # the new process loads forever
    assert sim.sup is not None
    fake.edit()
    sim.sup.request_reload()
    await sim.at(40)
    failed = sim.named("reload_failed")[0]
    assert failed["replica"] == R0 and failed["replaced"] == []
    assert failed["error"] == "not ready within startup_timeout_s=30; the old process keeps serving"
    new = sim.runner.latest(R0)
    assert new.pid != old.pid and new.returncode == -9 and sim.runner.killed == [new.pid]
    assert old.returncode is None and sim.nginx.routed() == ["127.0.0.1:9100", "127.0.0.1:9101"]
    assert len(sim.of(R1, "replica_started")) == 1  # replica-1 was never touched
    await sim.at(80)
    assert [e["reload"] for e in sim.of(R0, "replica_started") if "reload" in e] == [1]  # never restarted
    state = sim.state()
    assert state["reload"] == {"reload": 1, "outcome": "failed", "replica": R0, "error": failed["error"]}
    assert next((r["pid"], r["port"], r["config"]) for r in state["replicas"]) == (old.pid, 9100, 0)
    assert state["incoming"] == []
    assert await sim.stop() == 0


async def test_a_new_replica_that_crashes_stops_the_reload_after_the_ones_already_replaced(
    make: Callable[..., tuple[Sim, FakeSource]],
) -> None:
    sim, fake = make()
    sim.start()
    await sim.at(2)
    old1 = sim.runner.latest(R1)
    sim.runner.answer[R1] = "refused"
    assert sim.sup is not None
    fake.edit()
    sim.sup.request_reload()
    await sim.at(6)
    crashing = sim.runner.latest(R1)
    assert crashing.pid != old1.pid
    crashing.exit(1)
    await sim.at(8)
    failed = sim.named("reload_failed")[0]
    assert failed["replica"] == R1 and failed["error"] == "exited with code 1; the old process keeps serving"
    assert [p["replica"] for p in failed["replaced"]] == [R0]
    assert [(r["port"], r["config"]) for r in sim.state()["replicas"]] == [(9102, 1), (9101, 0)]
    assert old1.returncode is None and sim.nginx.routed() == ["127.0.0.1:9102", "127.0.0.1:9101"]
    assert await sim.stop() == 0


async def test_requests_during_a_reload_are_queued_and_coalesced_into_one(
    make: Callable[..., tuple[Sim, FakeSource]],
) -> None:
    sim, fake = make()
    sim.start()
    await sim.at(2)
    sim.runner.answer[R0] = "refused"  # reload 1's first replica takes a while
    assert sim.sup is not None
    fake.edit()
    sim.sup.request_reload("SIGHUP")
    await sim.at(3)
    fake.edit()
    sim.sup.request_reload("SIGHUP")
    fake.edit()
    sim.sup.request_reload("SIGHUP")
    await sim.at(4)
    assert [(e["reload"], e["queued"], e.get("coalesced")) for e in sim.named("reload_requested")] == [
        (1, False, None),
        (2, True, False),
        (2, True, True),
    ]
    assert fake.reads == 1
    sim.runner.latest(R0).answer = sim.runner.answer[R0] = "ok"
    await sim.at(30)
    assert [(e["event"], e["reload"]) for e in _reload_events(sim) if e["event"] != "reload_requested"] == [
        ("reload_started", 1),
        ("reload_replaced", 1),
        ("reload_replaced", 1),
        ("reload_done", 1),
        ("reload_started", 2),
        ("reload_replaced", 2),
        ("reload_replaced", 2),
        ("reload_done", 2),
    ]
    assert fake.reads == 2 and len(sim.runner.alive()) == 2
    assert await sim.stop() == 0


async def test_gpu_replicas_are_drained_first_then_started_on_the_freed_device(
    make: Callable[..., tuple[Sim, FakeSource]],
) -> None:
    sim, fake = make(gpus=(0, 1))
    sim.start()
    await sim.at(2)
    old = sim.runner.latest(R0)
    assert sim.sup is not None
    fake.edit()
    sim.sup.request_reload()
    await sim.at(20)
    assert sim.named("reload_started")[0]["order"] == "drain-first"
    story = [
        (e["event"], e.get("pid"))
        for e in sim.of(R0, since=2)
        if e["event"] != "transition" and not e["event"].startswith("reload_")
    ]
    new = sim.runner.latest(R0)
    assert story == [
        ("evicted", None),
        ("replica_draining", old.pid),
        ("replica_exited", old.pid),
        ("replica_started", new.pid),
        ("admitted", new.pid),
    ]
    assert sim.of(R0, "replica_started", since=2)[0]["device"] == "cuda:0"
    # While replica-0 was replaced, replica-1 served alone; never none.
    assert min(_ready_counts(sim, 2)) == 1 and sim.named("reload_done")[0]["reload"] == 1
    assert await sim.stop() == 0


async def test_drain_first_failure_starts_the_slot_again_on_its_previous_config(
    make: Callable[..., tuple[Sim, FakeSource]],
) -> None:
    sim, fake = make(gpus=(0, 1))
    sim.start()
    await sim.at(2)
    sim.runner.answer[R0] = "refused"
    assert sim.sup is not None
    fake.edit()
    sim.sup.request_reload()
    await sim.at(40)
    failed = sim.named("reload_failed")[0]
    assert (
        failed["error"]
        == "not ready within startup_timeout_s=30; replica-0 starts again on its previous config"
    )
    sim.runner.latest(R0).answer = sim.runner.answer[R0] = "ok"  # the slot's process on the old config
    await sim.at(45)
    back = sim.state()["replicas"][0]
    assert (back["port"], back["config"], back["state"]) == (9100, 0, "ready")
    assert sim.nginx.routed() == ["127.0.0.1:9100", "127.0.0.1:9101"] and len(sim.runner.alive()) == 2
    assert await sim.stop() == 0


async def test_stop_during_a_reload_leaves_no_process(make: Callable[..., tuple[Sim, FakeSource]]) -> None:
    sim, fake = make()
    sim.start()
    await sim.at(2)
    sim.runner.answer[R0] = "refused"
    assert sim.sup is not None
    fake.edit()
    sim.sup.request_reload()
    await sim.at(4)
    assert len(sim.runner.alive()) == 3  # the two old ones and replica-0's successor
    assert await sim.stop() == 0
    await sim.clock.advance_to(60)
    assert sim.runner.alive() == [] and len(sim.runner.procs) == 3
    assert [e["event"] for e in sim.events[-3:]] == ["stopping", "nginx_stopped", "stopped"]


async def test_without_a_config_source_a_reload_is_refused(tmp_path: Path) -> None:
    sims = Sims(tmp_path)
    sim = sims.make()
    sim.start()
    await sim.at(2)
    assert sim.sup is not None
    sim.sup.request_reload()
    await sim.at(3)
    assert sim.named("reload_refused")[0]["error"] == "this `up` has no config source to read again"
    assert await sim.stop() == 0
    await sims.close()


@pytest.mark.parametrize(
    ("state", "line"),
    [
        (None, None),
        (
            {"reload": 2, "phase": "starting replica-0 on port 9102"},
            "reload 2: in progress, starting replica-0 on port 9102",
        ),
        (
            {"reload": 2, "outcome": "done", "replaced": [PAIR, PAIR], "wall_s": 80.5},
            "reload 2: done in 80.5 s, 2 replica(s) replaced",
        ),
        (
            {"reload": 2, "outcome": "failed", "replica": R1, "error": "exited with code 1"},
            "reload 2: failed at replica-1: exited with code 1",
        ),
        (
            {"reload": 2, "outcome": "refused", "error": "nginx.port: needs a full restart"},
            "reload 2: refused: nginx.port: needs a full restart",
        ),
    ],
)
def test_status_says_what_the_last_reload_did(state: dict[str, Any] | None, line: str | None) -> None:
    assert status.reload_line(state) == line


def test_status_lists_the_replica_a_reload_starts_and_the_one_it_retires() -> None:
    row = {
        "name": R0,
        "pool": "default",
        "device": "cpu:0",
        "port": 9100,
        "pid": 10,
        "state": "ready",
        "restarts": 0,
        "reason": "x",
    }
    table = status.format_status(
        {
            "replicas": [{**row, "retiring": True}, {**row, "name": R1, "port": 9101}],
            "incoming": [{**row, "port": 9102, "pid": 20, "state": "starting"}],
            "reload": {"reload": 1, "phase": "starting replica-0 on port 9102"},
        }
    )
    lines = table.splitlines()
    assert lines[1].split()[:6] == [R0, "default", "cpu:0", "9100", "10", "retiring"]
    assert lines[3].split()[:7] == [R0, "(new)", "default", "cpu:0", "9102", "20", "starting"]
    assert lines[-1] == "reload 1: in progress, starting replica-0 on port 9102"


async def test_a_config_nginx_cannot_even_render_stops_up_instead_of_hanging(
    make: Callable[..., tuple[Sim, FakeSource]], monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, _fake = make()
    sim.start()
    await sim.at(2)
    assert sim.sup is not None

    def broken(routing: object) -> str:
        raise KeyError("cpu_max_conns")  # e.g. a template that asks for a value nobody passes

    monkeypatch.setattr(sim.sup.edge, "render", broken)
    sim.runner.latest(R0).exit(-9)  # a routing change: Nginx must render again
    await sim.at(3)
    assert sim.task is not None and sim.task.done() and sim.task.result() == 1
    assert [e["error"] for e in sim.named("nginx_failed")] == ["KeyError: 'cpu_max_conns'"]

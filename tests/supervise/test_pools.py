"""Pools in `up`: the --pool flag, the plan of several pools, what each replica reads, `status`, doctor,
the reload rules per pool, and supervisor histories with two pools on the fake clock."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hunyuan_serve import cli
from hunyuan_serve.config import ConfigError, build_config, pool_from_flag, resolve_pools
from hunyuan_serve.doctor import preflight_pools
from hunyuan_serve.edge.targets import REPLICAS_FILE, TARGETS_DIR
from hunyuan_serve.run.plan import plan_replicas, pools_of, with_pool_engine
from hunyuan_serve.supervise import reload, status
from hunyuan_serve.supervise.command import write_configs
from tests.support.fakes import FakeSource
from tests.support.supervisor_sim import Sim, Sims, settings_with

RUN = Path("/run/hs")
TWO = [{"name": "a", "model": "/m/a", "replicas": 1}, {"name": "b", "model": "/m/b", "replicas": 1}]


# -- --pool ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pool"),
    [
        ("mt=tencent/Hunyuan-MT-7B", {"name": "mt", "model": "tencent/Hunyuan-MT-7B"}),
        ("mt=/m/a:replicas=2", {"name": "mt", "model": "/m/a", "replicas": 2}),
        ("chimera=/m/c:gpus=0,1", {"name": "chimera", "model": "/m/c", "gpus": [0, 1]}),
        (
            "b-2=/m/b:replicas=3:gpus=GPU-abcd",
            {"name": "b-2", "model": "/m/b", "replicas": 3, "gpus": ["GPU-abcd"]},
        ),
    ],
)
def test_a_pool_flag_is_an_entry_of_pools(text: str, pool: dict[str, Any]) -> None:
    assert pool_from_flag(text) == pool


@pytest.mark.parametrize(
    ("text", "part"),
    [
        ("mt", "'mt': no '=' between the pool's name and its model"),
        ("Mt=/m", "name 'Mt': lowercase letters"),
        ("=/m", "name '': lowercase letters"),
        ("mt=", "model: empty"),
        ("mt=/m:replicas=0", "'replicas=0': replicas is a whole number >= 1"),
        ("mt=/m:replicas=two", "'replicas=two': replicas is a whole number >= 1"),
        ("mt=/m:gpus=zero", "'gpus=zero': gpus must be device numbers or GPU-/MIG- UUIDs"),
        ("mt=/m:gpus=all", "'gpus=all': name the pool's devices"),
        ("mt=/m:gpus=1,1", "'gpus=1,1': gpus must be distinct"),
        ("mt=/m:cpus=2", "'cpus=2': not replicas=N or gpus=0,1"),
        ("mt=/m:replicas", "'replicas': not replicas=N or gpus=0,1"),
        ("mt=/m:replicas=1:replicas=2", "'replicas=2': replicas given twice"),
    ],
)
def test_a_malformed_pool_flag_names_the_flag_and_the_part(text: str, part: str) -> None:
    with pytest.raises(ConfigError) as err:
        pool_from_flag(text)
    assert str(err.value).startswith(f"--pool {text!r}: {part}")
    assert "(expected NAME=MODEL[:replicas=N][:gpus=0,1])" in str(err.value)


def test_pool_flags_build_the_pools_section(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["config", "--pool", "a=/m/a:replicas=2", "--pool", "b=/m/b", "--max-num-seqs", "8"]
    assert cli.main(argv) == 0
    data = yaml.safe_load(capsys.readouterr().out)
    assert [(p["name"], p["model"], p["replicas"]) for p in data["pools"]] == [
        ("a", "/m/a", 2),
        ("b", "/m/b", None),
    ]
    cfg = build_config(data, {})
    assert [
        (p.name, p.cfg.engine.model, p.cfg.replicas, p.cfg.engine.max_num_seqs) for p in resolve_pools(cfg)
    ] == [
        ("a", "/m/a", 2, 8),
        ("b", "/m/b", 1, 8),
    ]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--pool", "a=/m/a:replicas=x"], "--pool 'a=/m/a:replicas=x': 'replicas=x'"),
        (["--pool", "a=/m/a", "--pool", "a=/m/b"], "pools: the name 'a' is repeated"),
        (["--pool", "a=/m/a:gpus=0", "--pool", "b=/m/b:gpus=0"], "pools.b.gpus: GPU 0 is already pool a's"),
    ],
)
def test_a_bad_pool_flag_exits_2_naming_it(
    flags: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (["config"], ["render", "nginx"], ["up", "--run-dir", "/nonexistent/run"]):
        assert cli.main([*command, *flags]) == 2
        assert said in capsys.readouterr().err


def _two_checkpoints(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two checkpoints `render` can place as `up` does (their config.json gives the family); no
    nvidia-smi on PATH, so the replicas are planned on CPU."""
    monkeypatch.setenv("PATH", "/nonexistent")
    config = {"model_type": "hunyuan_v1_dense", "architectures": ["HunYuanDenseV1ForCausalLM"]}
    models = root / "a" / "Hunyuan-MT-7B", root / "b" / "Hunyuan-MT-7B-fp8"
    for model in models:
        model.mkdir(parents=True)
        (model / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return models


def test_render_lists_every_pools_replicas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _two_checkpoints(tmp_path, monkeypatch)
    argv = ["render", "nginx", "--pool", f"a={a}:replicas=2", "--pool", f"b={b}", "--base-port", "9100"]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert all(f"server 127.0.0.1:{port} " in text for port in (9100, 9101, 9102))


def test_render_hands_each_pools_servers_to_the_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hunyuan_serve.edge import render
    from hunyuan_serve.edge.routing import Routing

    a, b = _two_checkpoints(tmp_path, monkeypatch)
    seen: list[Routing] = []
    monkeypatch.setattr(render, "render_nginx", lambda cfg, routing, **_: seen.append(routing) or "")
    assert cli.main(["render", "nginx", "--pool", f"a={a}:replicas=2", "--pool", f"b={b}"]) == 0
    assert {pool: [s.name for s in servers] for pool, servers in seen[0].pools().items()} == {
        "a": ["a-0", "a-1"],
        "b": ["b-0"],
    }


# -- the plan ----------------------------------------------------------------------------------------


def _plan(data: dict[str, Any], gpus: list[int | str], cores: list[int]) -> list[tuple[str, str, str, int]]:
    cfg = build_config(data, {})
    return [
        (p.name, p.pool, p.device, p.port)
        for p in plan_replicas(cfg, visible_gpus=gpus, cores=cores, run_dir=RUN, python="py")
    ]


@pytest.mark.parametrize(
    ("data", "gpus", "cores", "plan"),
    [
        # CPU: ports contiguous across pools, every replica on its own core when there are enough.
        ({"pools": TWO}, [], [0, 1], [("a-0", "a", "cpu:0", 8101), ("b-0", "b", "cpu:1", 8102)]),
        (
            {"pools": [{**TWO[0], "replicas": 2}, TWO[1]], "base_port": 9000},
            [],
            list(range(6)),
            [("a-0", "a", "cpu:0-1", 9000), ("a-1", "a", "cpu:2-3", 9001), ("b-0", "b", "cpu:4-5", 9002)],
        ),
        # More replicas than cores: they share, round robin across the pools.
        (
            {"pools": [{**TWO[0], "replicas": 2}, TWO[1]]},
            [],
            [0, 1],
            [("a-0", "a", "cpu:0", 8101), ("a-1", "a", "cpu:1", 8102), ("b-0", "b", "cpu:0", 8103)],
        ),
        # GPUs: each pool on its own devices.
        (
            {"pools": [{**TWO[0], "gpus": [2]}, {**TWO[1], "gpus": "0,1"}]},
            [0, 1, 2],
            [0],
            [("a-0", "a", "cuda:2", 8101), ("b-0", "b", "cuda:0", 8102), ("b-1", "b", "cuda:1", 8103)],
        ),
        # A CPU pool beside a GPU pool takes the cores.
        (
            {"pools": [{**TWO[0], "gpus": [0]}, {**TWO[1], "engine": {"device": "cpu"}}]},
            [0, 1],
            [0, 1],
            [("a-0", "a", "cuda:0", 8101), ("b-0", "b", "cpu:0-1", 8102)],
        ),
        # Tensor parallel on CPU: a pool's ranks take their own cores among the others.
        (
            {"pools": [TWO[0], {**TWO[1], "engine": {"tensor_parallel_size": 2}}]},
            [],
            [0, 1, 2],
            [("a-0", "a", "cpu:0", 8101), ("b-0", "b", "cpu:1|2", 8102)],
        ),
    ],
)
def test_plan_of_two_pools(
    data: dict[str, Any], gpus: list[int | str], cores: list[int], plan: list[tuple[str, str, str, int]]
) -> None:
    assert _plan(data, gpus, cores) == plan


def test_without_a_pools_section_the_names_stay_replica_n() -> None:
    assert _plan({"replicas": 2}, [], [0, 1]) == [
        ("replica-0", "default", "cpu:0", 8101),
        ("replica-1", "default", "cpu:1", 8102),
    ]


@pytest.mark.parametrize(
    ("data", "gpus", "message"),
    [
        (
            {"pools": TWO},
            [0, 1],
            "pools.a.gpus: several pools on a machine with GPUs: name each pool's devices",
        ),
        ({"pools": [{**TWO[0], "gpus": [0]}, TWO[1]]}, [0, 1], "pools.b.gpus: several pools"),
        ({"pools": [{**TWO[0], "gpus": [3]}, TWO[1]]}, [0, 1], r"gpus: device\(s\) \[3\] not visible"),
        (
            {"pools": [TWO[0], {**TWO[1], "replicas": 9}], "base_port": 65530},
            [],
            "leaves no port for replica 6",
        ),
    ],
)
def test_a_plan_that_cannot_be_laid_out_is_refused(
    data: dict[str, Any], gpus: list[int], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _plan(data, gpus, [0, 1])


def test_each_replica_reads_its_pools_config(tmp_path: Path) -> None:
    cfg = build_config(
        {"pools": [TWO[0], {**TWO[1], "replica": {"max_in_flight": 16}, "chimera_pool": None}]}, {}
    )
    plans = plan_replicas(cfg, visible_gpus=[], cores=[0, 1], run_dir=tmp_path, python="py")
    placed = with_pool_engine(
        cfg, "b", {"model": "/local/b", "served_model_name": "org/b", "prompt_family": "hy-mt1.5"}
    )
    write_configs(placed, plans, tmp_path)
    a, b = (yaml.safe_load((tmp_path / f"{n}.yaml").read_text()) for n in ("a-0", "b-0"))
    assert (a["engine"]["model"], a["replica"]["max_in_flight"], a["replica"]["port"], a["pools"]) == (
        "/m/a",
        256,
        8101,
        [],
    )
    assert (b["engine"]["model"], b["engine"]["served_model_name"], b["engine"]["prompt_family"]) == (
        "/local/b",
        "org/b",
        "hy-mt1.5",
    )
    assert (b["replica"]["max_in_flight"], b["replica"]["port"]) == (16, 8102)
    stack = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert [p["name"] for p in stack["pools"]] == ["a", "b"] and stack["pools"][1]["model"] == "/local/b"
    assert pools_of(build_config(stack, {}))["b"].cfg.engine.prompt_family == "hy-mt1.5"


def test_doctor_checks_each_pools_model(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = build_config({"pools": TWO, "base_port": 9100}, {})
    plans = plan_replicas(cfg, visible_gpus=[], cores=[0, 1], run_dir=RUN, python="py")
    rows = {c.name: c for c in preflight_pools(cfg, plans, {"a": "/nonexistent/a", "b": "/nonexistent/b"})}
    assert rows["model (pool a)"].failed and "/nonexistent/a" in rows["model (pool a)"].detail
    assert rows["model (pool b)"].failed and "/nonexistent/b" in rows["model (pool b)"].detail
    assert "127.0.0.1:9101" in rows["ports (pool b)"].detail and "9100" not in rows["ports (pool b)"].detail
    assert "python" in rows and "model" not in rows  # the host's rows once, the pools' per pool


# -- status ------------------------------------------------------------------------------------------


def test_status_names_each_pool_and_its_model() -> None:
    row = {"device": "cpu:0", "port": 9100, "pid": 10, "state": "ready", "restarts": 0, "reason": "ok"}
    pools = [
        {"name": "a", "model": "org/A", "family": "hunyuan-mt", "replicas": ["a-0"]},
        {"name": "b", "model": "org/B", "family": "hy-mt1.5", "replicas": ["b-0"]},
    ]
    table = status.format_status(
        {
            "running": True,
            "pid": 5,
            "run_dir": "/run/hs",
            "model": "org/A",
            "family": "hunyuan-mt",
            "pools": pools,
            "replicas": [
                {**row, "name": "a-0", "pool": "a"},
                {**row, "name": "b-0", "pool": "b", "port": 9101},
            ],
        }
    )
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["NAME", "POOL", "DEVICE"]
    assert [line.split()[:3] for line in lines[1:3]] == [["a-0", "a", "cpu:0"], ["b-0", "b", "cpu:0"]]
    assert "up: running (pid 5), 2 pools, run dir /run/hs" in lines
    assert "pool a: model org/A (prompt family hunyuan-mt), 1 replica(s)" in lines
    assert "pool b: model org/B (prompt family hy-mt1.5), 1 replica(s)" in lines
    one = status.format_status(
        {"running": True, "pid": 5, "model": "org/A", "family": "hunyuan-mt", "pools": pools[:1]}
    )
    assert "pool a:" in one  # a named pool, even alone, is shown as one
    single = status.format_status({"running": True, "pid": 5, "model": "m", "family": "f", "run_dir": "/r"})
    assert "up: running (pid 5), model m (prompt family f), run dir /r" in single.splitlines()


# -- the reload rules per pool -------------------------------------------------------------------------


def _pools(
    *changes: tuple[int, dict[str, Any]], top: dict[str, Any] | None = None, names: tuple[str, ...] = ()
) -> Any:
    pools = (
        copy.deepcopy(TWO) if not names else [{"name": n, "model": f"/m/{n}", "replicas": 1} for n in names]
    )
    for index, change in changes:
        pools[index].update(change)
    return build_config({"pools": pools, **(top or {})}, {})


@pytest.mark.parametrize(
    ("new", "refused"),
    [
        (_pools(), []),
        (_pools((1, {"engine": {"max_num_seqs": 8}})), []),
        (_pools((1, {"model": "/m/b2"})), []),
        (_pools(top={"replicas": 4}), []),  # both pools say their own replicas
        (_pools(names=("a", "b", "c")), ["pools (pool c added)"]),
        (_pools(names=("a",)), ["pools (pool b removed)"]),
        (_pools(names=("b", "a")), ["pools (their order changed)"]),
        (
            build_config({"engine": {"model": "/m/a"}}, {}),
            ["pools (the pools section removed)"],
        ),
        (_pools((1, {"replicas": 2})), ["pools.b.replicas"]),
        (_pools((0, {"gpus": [0]})), ["pools.a.gpus"]),
        (_pools((1, {"engine": {"device": "cpu"}})), ["pools.b.engine.device"]),
        (_pools(top={"nginx": {"port": 9000}}), ["nginx.port"]),
        (
            _pools((0, {"replicas": 3}), top={"base_port": 9000}),
            ["base_port", "pools.a.replicas"],
        ),
    ],
)
def test_what_a_reload_of_pools_refuses(new: Any, refused: list[str]) -> None:
    reasons = reload.refusals(_pools(), new)
    assert [r.split(": needs a full restart (")[0] for r in reasons] == refused
    assert all(r.endswith(")") and ": needs a full restart (" in r for r in reasons)


def test_changed_keys_name_the_pool() -> None:
    new = _pools((1, {"engine": {"max_num_seqs": 8}, "model": "/m/b2"}))
    assert reload.changed_keys(_pools(), new) == ["pools.b.engine.max_num_seqs", "pools.b.model"]
    one = build_config({"engine": {"model": "/m/a"}}, {})
    assert "pools (a pools section in place of the one-model settings)" in reload.refusals(one, _pools())[0]


@pytest.mark.parametrize(
    ("new", "replaced"),
    [
        (_pools(), []),
        (_pools(top={"nginx": {"max_fails": 3}, "supervisor": {"probe_timeout_s": 1.0}}), []),  # not theirs
        (_pools((1, {"model": "/m/b2"})), [1]),
        (_pools((0, {"replica": {"max_tokens": 9}})), [0]),
        (_pools(top={"replica": {"max_tokens": 9}}), [0, 1]),  # every pool inherits it
        (
            _pools((0, {"replica": {"max_tokens": 512}}), top={"replica": {"max_tokens": 9}}),
            [1],
        ),  # a says its own
        (_pools(top={"log_level": "debug"}), [0, 1]),
    ],
)
def test_a_reload_replaces_only_the_replicas_whose_settings_changed(new: Any, replaced: list[int]) -> None:
    old = _pools()
    plans = plan_replicas(new, visible_gpus=[], cores=[0, 1], run_dir=RUN, python="py")
    running = [reload.replica_view(old, p.pool) for p in plans]
    assert reload.to_replace(running, new, plans) == replaced


# -- histories with two pools on the fake clock ----------------------------------------------------------


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Callable[..., tuple[Sim, FakeSource]]]:
    sims = Sims(tmp_path)

    def factory(**top: Any) -> tuple[Sim, FakeSource]:
        settings = settings_with({}, pools=copy.deepcopy(TWO), **top)
        sim = sims.make(settings)
        fake = FakeSource(copy.deepcopy(settings), tmp_path)
        sim.source = fake.source()
        return sim, fake

    yield factory
    await sims.close()


async def test_both_pools_are_admitted_each_labelled_with_its_pool(
    make: Callable[..., tuple[Sim, FakeSource]],
) -> None:
    sim, _fake = make()
    sim.start()
    await sim.at(3)
    assert [(e["replica"], e["pool"]) for e in sim.named("admitted")] == [("a-0", "a"), ("b-0", "b")]
    assert all(e["pool"] == e["replica"][0] for e in sim.events if "replica" in e)  # every replica event
    assert sim.nginx.routed() == ["127.0.0.1:9100", "127.0.0.1:9101"]
    assert sim.sup is not None and list(sim.sup.replicas.routing().pools()) == ["a", "b"]
    assert [(r["name"], r["pool"], r["state"]) for r in sim.state()["replicas"]] == [
        ("a-0", "a", "ready"),
        ("b-0", "b", "ready"),
    ]
    targets = json.loads((sim.run_dir / TARGETS_DIR / REPLICAS_FILE).read_text())
    assert [(t["labels"]["replica"], t["labels"]["pool"]) for t in targets] == [("a-0", "a"), ("b-0", "b")]
    assert await sim.stop() == 0


async def test_one_pools_replica_dies_and_only_it_is_evicted_and_restarted(
    make: Callable[..., tuple[Sim, FakeSource]],
) -> None:
    sim, _fake = make()
    sim.start()
    await sim.at(3)
    a, b = sim.runner.latest("a-0"), sim.runner.latest("b-0")
    b.exit(1)
    await sim.at(3.5)
    assert sim.nginx.routed() == ["127.0.0.1:9100"]  # pool a serves on
    await sim.at(12)
    story = sim.story("b-0", since=3)
    assert story[:3] == ["replica_exited", "ready>restarting", "evicted"] and story[-1] == "admitted"
    assert sim.runner.latest("b-0").pid != b.pid and sim.of("a-0", since=3) == []
    assert a.returncode is None and sim.runner.latest("a-0") is a
    assert sim.nginx.routed() == ["127.0.0.1:9100", "127.0.0.1:9101"]
    assert await sim.stop() == 0


async def test_a_reload_of_one_pool_keeps_the_other_pools_replica(
    make: Callable[..., tuple[Sim, FakeSource]],
) -> None:
    sim, fake = make()
    sim.start()
    await sim.at(3)
    a, b = sim.runner.latest("a-0"), sim.runner.latest("b-0")
    fake.settings["pools"][1].update(model="/m/b2", replica={"max_tokens": 64})
    assert sim.sup is not None
    sim.sup.request_reload()
    await sim.at(12)
    started = sim.named("reload_started")[0]
    assert (started["replace"], started["ports"]) == (["b-0"], [9103])
    assert started["changed"] == ["pools.b.model", "pools.b.replica.max_tokens"]
    done = sim.named("reload_done")[0]
    assert done["kept"] == ["a-0"]
    assert [
        (p["replica"], p["pool"], p["old_pid"], p["old_port"], p["new_port"]) for p in done["replaced"]
    ] == [("b-0", "b", b.pid, 9101, 9103)]
    # Pool a's replica never left Nginx nor stopped: same process, same port, the config it started with.
    assert a.returncode is None and sim.runner.latest("a-0") is a and a.pid not in sim.runner.stopped
    assert [e["event"] for e in sim.of("a-0", since=3)] == []
    assert sim.runner.stopped == [b.pid] and sim.nginx.routed() == ["127.0.0.1:9100", "127.0.0.1:9103"]
    assert [(r["name"], r["port"], r["config"]) for r in sim.state()["replicas"]] == [
        ("a-0", 9100, 0),
        ("b-0", 9103, 1),
    ]
    written = yaml.safe_load((sim.run_dir / "b-0.r1.yaml").read_text())
    assert (written["engine"]["model"], written["replica"]["max_tokens"], written["replica"]["port"]) == (
        "/m/b2",
        64,
        9103,
    )
    assert not (sim.run_dir / "a-0.r1.yaml").exists()
    # A second reload that changes pool a replaces only a-0, onto the other port set.
    fake.settings["pools"][0]["replica"] = {"max_tokens": 32}
    sim.sup.request_reload()
    await sim.at(24)
    second = sim.named("reload_done")[1]
    assert [(p["replica"], p["new_port"]) for p in second["replaced"]] == [("a-0", 9102)]
    assert second["kept"] == ["b-0"] and sim.nginx.routed() == ["127.0.0.1:9102", "127.0.0.1:9103"]
    assert await sim.stop() == 0


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        ({"pools": [*TWO, {"name": "c", "model": "/m/c"}]}, "pools (pool c added): needs a full restart"),
        ({"pools": [TWO[0], {**TWO[1], "replicas": 2}]}, "pools.b.replicas: needs a full restart"),
    ],
)
async def test_a_reload_that_changes_the_pools_layout_is_refused_and_nothing_is_touched(
    make: Callable[..., tuple[Sim, FakeSource]], edit: dict[str, Any], error: str
) -> None:
    sim, fake = make()
    sim.start()
    await sim.at(3)
    procs = list(sim.runner.procs)
    fake.settings.update(copy.deepcopy(edit))
    assert sim.sup is not None
    sim.sup.request_reload()
    await sim.at(6)
    assert error in sim.named("reload_refused")[0]["error"]
    assert sim.runner.procs == procs and sim.runner.stopped == [] and sim.named("reload_started") == []
    assert await sim.stop() == 0


async def test_a_reload_of_nginx_settings_only_replaces_no_replica(
    make: Callable[..., tuple[Sim, FakeSource]],
) -> None:
    sim, fake = make()
    sim.start()
    await sim.at(3)
    procs = list(sim.runner.procs)
    fake.settings["nginx"] = {**fake.settings["nginx"], "max_fails": 2}
    assert sim.sup is not None
    sim.sup.request_reload()
    await sim.at(6)
    done = sim.named("reload_done")[0]
    assert (done["replaced"], done["kept"]) == ([], ["a-0", "b-0"])
    assert sim.runner.procs == procs and sim.runner.stopped == []
    assert "max_fails=2" in sim.nginx.text and sim.nginx.routed() == ["127.0.0.1:9100", "127.0.0.1:9101"]
    assert reload.outcome(sim.events, 1) == (
        0,
        f"reload 1 done in {done['wall_s']} s: replaced no replica; "
        "kept a-0, b-0 (their settings did not change)",
    )
    assert await sim.stop() == 0


def test_a_pool_with_a_chimera_pool_sends_its_ensembles_to_that_pools_route(tmp_path: Path) -> None:
    """Its replicas' chimera_url is this host's Nginx route to the Chimera pool; the Chimera's has none."""
    cfg = build_config(
        {
            "nginx": {"port": 9090, "listen": "0.0.0.0"},
            "pools": [
                {"name": "mt", "model": "/m/mt", "chimera_pool": "chimera"},
                {"name": "chimera", "model": "/m/c"},
            ],
        },
        {},
    )
    plans = plan_replicas(cfg, visible_gpus=[], cores=[0, 1], run_dir=tmp_path, python="py")
    write_configs(cfg, plans, tmp_path)
    mt, chimera = (yaml.safe_load((tmp_path / f"{n}.yaml").read_text()) for n in ("mt-0", "chimera-0"))
    assert mt["replica"]["chimera_url"] == "http://127.0.0.1:9090/_hs/pool/chimera"
    assert chimera["replica"]["chimera_url"] is None


@pytest.mark.parametrize(
    ("pools", "extra", "families", "message"),
    [
        (
            [{"name": "mt", "chimera_pool": "b"}, {"name": "b"}],
            {},
            {"mt": "hunyuan-mt", "b": "hy-mt1.5"},
            "pools.mt.chimera_pool: pool b serves prompt family hy-mt1.5, not a Hunyuan-MT-Chimera",
        ),
        (
            [{"name": "c"}, {"name": "mt", "chimera_pool": "c"}],
            {},
            {"c": "chimera", "mt": "hunyuan-mt"},
            "default_pool: pool c is a Chimera",
        ),
        (
            [{"name": "mt", "chimera_pool": "c"}, {"name": "c"}],
            {"nginx": {"dialect_pool": "c"}},
            {"c": "chimera", "mt": "hunyuan-mt"},
            "nginx.dialect_pool: pool c is a Chimera",
        ),
        (
            [
                {"name": "mt", "chimera_pool": "c"},
                {"name": "c", "replica": {"ensemble_candidates": 2, "chimera_url": "http://h:1"}},
            ],
            {},
            {"c": "chimera", "mt": "hunyuan-mt"},
            "pools.c.replica.ensemble_candidates: pool c is the Chimera",
        ),
    ],
)
def test_a_pools_role_must_fit_its_family(
    pools: list[dict[str, Any]], extra: dict[str, Any], families: dict[str, str], message: str
) -> None:
    from hunyuan_serve.supervise.placement import check_pool_roles

    cfg = build_config({"pools": pools, **extra, "replica": {"chimera_url": None}}, {})
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_pool_roles(cfg, families)


def test_roles_that_fit_pass() -> None:
    from hunyuan_serve.supervise.placement import check_pool_roles

    cfg = build_config({"pools": [{"name": "mt", "chimera_pool": "c"}, {"name": "c"}]}, {})
    check_pool_roles(cfg, {"mt": "hunyuan-mt", "c": "chimera"})


def test_a_reload_that_changes_a_pools_chimera_pool_replaces_its_replicas() -> None:
    before = build_config({"pools": [{"name": "mt"}, {"name": "c"}]}, {})
    after = build_config({"pools": [{"name": "mt", "chimera_pool": "c"}, {"name": "c"}]}, {})
    assert reload.replica_view(before, "mt") != reload.replica_view(after, "mt")
    assert reload.replica_view(before, "c") == reload.replica_view(after, "c")


def test_render_k8s_refuses_ensembles_across_pools() -> None:
    from hunyuan_serve.k8s.pools import plan_pools

    cfg = build_config(
        {"pools": [{"name": "mt", "model": "m", "chimera_pool": "c"}, {"name": "c", "model": "c"}]}, {}
    )
    with pytest.raises(ConfigError, match=r"pools\.mt\.chimera_pool: render k8s does not wire ensembles"):
        plan_pools(cfg)

"""Table tests of what the bench starts: the setup plan on CPU and GPUs, each stack's `up` argv
(parsed by `up`'s own parser), the baselines' engine flags and environment; no GPU needed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench import names, targets
from bench.session import Plan
from bench.setups import GPU_UNEQUAL_SKIPPED, SetupPlan, plan_setups
from bench.targets import ENGINE, Hardware
from hunyuan_serve.cli import build_parser
from hunyuan_serve.config import ServeConfig, config_from_args

CPU, GPU4, GPU1 = Hardware(), Hardware(("0", "1", "2", "3")), Hardware(("3",))
ALL = (names.STEP_STACK, names.STEP_STACK_1, names.STEP_VLLM, names.STEP_SERIAL)

# (hardware, replicas asked, plan, skip) -> what runs: steps, stack size and flags, one-replica flags,
# unequal run, all at once, notes.
PLANS = [
    (CPU, 2, Plan(), (), SetupPlan(ALL, 2, ("--replicas", "2"), ("--replicas", "1"), True, True)),
    (
        CPU,
        4,
        Plan(),
        ("vllm",),
        SetupPlan(ALL[:2] + ALL[3:], 4, ("--replicas", "4"), ("--replicas", "1"), True, True),
    ),
    (
        CPU,
        1,
        Plan(),
        (),
        SetupPlan(ALL[:1] + ALL[2:], 1, ("--replicas", "1"), ("--replicas", "1"), False, True),
    ),
    (
        CPU,
        2,
        Plan.quick(),
        (),
        SetupPlan(
            (names.STEP_STACK, names.STEP_SERIAL), 2, ("--replicas", "2"), ("--replicas", "1"), False, True
        ),
    ),
    # GPUs: --replicas is ignored by `up` there, so each stack names its devices; no busy-loop run.
    (
        GPU4,
        2,
        Plan(),
        (),
        SetupPlan(ALL, 2, ("--gpus", "0,1"), ("--gpus", "0"), False, False, (GPU_UNEQUAL_SKIPPED,)),
    ),
    (
        GPU4,
        4,
        Plan.quick(),
        (),
        SetupPlan(
            (names.STEP_STACK, names.STEP_SERIAL), 4, ("--gpus", "0,1,2,3"), ("--gpus", "0"), False, False
        ),
    ),
    (
        GPU1,
        2,
        Plan(),
        (),
        SetupPlan(
            ALL[:1] + ALL[2:],
            1,
            ("--gpus", "3"),
            ("--gpus", "3"),
            False,
            False,
            ("1 GPU(s) for 2 replicas asked for: the stack runs 1 replica(s).", GPU_UNEQUAL_SKIPPED),
        ),
    ),
    (GPU4, 2, Plan(), ("stack",), SetupPlan(ALL[1:], 2, ("--gpus", "0,1"), ("--gpus", "0"), False, False)),
]


@pytest.mark.parametrize(("hw", "replicas", "plan", "skip", "expected"), PLANS)
def test_setup_plan(
    hw: Hardware, replicas: int, plan: Plan, skip: tuple[str, ...], expected: SetupPlan
) -> None:
    assert plan_setups(hw, replicas, plan, skip) == expected


def up_config(argv: list[str]) -> ServeConfig:
    assert argv[:4] == [*targets.HUNYUAN, "up"]
    return config_from_args(build_parser().parse_args(argv[3:]))


@pytest.mark.parametrize(
    ("hw", "replicas", "gpus", "count"),
    [(CPU, 2, None, 2), (CPU, 1, None, 1), (GPU4, 2, (0, 1), 2), (GPU4, 1, (0,), 2), (GPU1, 1, (3,), 2)],
)
def test_each_stack_asks_up_for_what_its_label_says(
    hw: Hardware, replicas: int, gpus: tuple[int, ...] | None, count: int, tmp_path: Path
) -> None:
    plan = plan_setups(hw, replicas, Plan())
    flags = plan.stack_flags if replicas == plan.replicas and replicas > 1 else plan.one_replica_flags
    argv = targets.stack_argv(
        tmp_path / "m", tmp_path / "run", flags, port=8123, base_port=9100, balance="round_robin"
    )
    cfg = up_config(argv)
    # On GPUs `up` runs one replica per listed device (cfg.replicas is not read there); on CPU, cfg.replicas.
    assert cfg.gpus == gpus
    if gpus is None:
        assert cfg.replicas == replicas
    assert (cfg.engine.model, cfg.run_dir, cfg.nginx.port, cfg.base_port) == (
        str(tmp_path / "m"),
        str(tmp_path / "run"),
        8123,
        9100,
    )
    assert cfg.nginx.balance == "round_robin" and cfg.replica.cache_path == str(
        tmp_path / "run" / "cache.sqlite"
    )
    # The bench's engine settings reach the replicas as config, the one home of their values.
    assert (cfg.engine.max_model_len, cfg.engine.cpu_kvcache_space_gib) == (1024, 1)
    assert cfg.engine.max_model_len == ENGINE.max_model_len
    assert cfg.engine.cpu_kvcache_space_gib == ENGINE.cpu_kvcache_space_gib


@pytest.mark.parametrize(
    ("device", "visible", "expected"),
    [
        ("auto", [], CPU),
        ("auto", [0, 1, 2, 3], GPU4),
        ("auto", ["GPU-1234", "MIG-5678"], Hardware(("GPU-1234", "MIG-5678"))),
        ("cuda", [3], GPU1),
        ("cpu", [], CPU),
    ],
)
def test_the_device_is_chosen_in_one_place(device: str, visible: list[int | str], expected: Hardware) -> None:
    assert targets.detect_hardware(device, lambda: visible) == expected


@pytest.mark.parametrize(
    ("device", "visible", "message"),
    [
        ("cuda", [], "--device cuda, but nvidia-smi lists no GPU"),
        ("cpu", [0], r"--device cpu, but `up` would run its replicas on the GPUs it sees \(0\)"),
        ("tpu", [], "device must be one of auto, cpu, cuda"),
    ],
)
def test_a_device_the_host_cannot_give_is_refused(device: str, visible: list[int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        targets.detect_hardware(device, lambda: visible)


@pytest.mark.parametrize(
    ("kwargs", "flags"),
    [
        (
            {"model": "m", "dtype": "float32", "enforce_eager": True},
            ["--dtype", "float32", "--enforce-eager"],
        ),
        (
            {"max_model_len": 1024, "enforce_eager": False, "seed": 0},
            ["--max-model-len", "1024", "--seed", "0"],
        ),
        ({"distributed_executor_backend": "uni"}, ["--distributed-executor-backend", "uni"]),
    ],
)
def test_engine_kwargs_become_vllm_flags(kwargs: dict[str, object], flags: list[str]) -> None:
    assert targets.kwargs_to_flags(kwargs, skip=("model",)) == flags


@pytest.mark.parametrize(("hw", "eager"), [(CPU, True), (GPU4, False)])
def test_the_vllm_server_gets_the_engine_arguments_a_replica_builds(hw: Hardware, eager: bool) -> None:
    flags = targets.vllm_engine_flags(Path("/m"), hw)
    assert flags[flags.index("--max-model-len") + 1] == "1024"
    assert ("--enforce-eager" in flags) is eager  # eager on CPU, graph capture on GPUs
    assert "--model" not in flags  # start_vllm passes it once, in front
    assert ("--gpu-memory-utilization" in flags) is hw.on_gpu


def test_baselines_get_the_cpu_environment_from_the_replicas_own_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("VLLM_CPU_KVCACHE_SPACE", "VLLM_TARGET_DEVICE", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(key, raising=False)
    cpu = targets.baseline_env(CPU, {"EXTRA": "1"})
    assert (cpu["VLLM_TARGET_DEVICE"], cpu["VLLM_CPU_KVCACHE_SPACE"], cpu["EXTRA"]) == ("cpu", "1", "1")
    assert "CUDA_VISIBLE_DEVICES" not in cpu
    gpu = targets.baseline_env(GPU1)
    assert gpu["CUDA_VISIBLE_DEVICES"] == "3" and "VLLM_CPU_KVCACHE_SPACE" not in gpu
    assert gpu["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # "3" is the device nvidia-smi calls 3


def bench_imports(path: Path) -> set[str]:
    """The bench modules a file imports, at its top or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("bench.")}


def test_the_bench_modules_import_each_other_without_a_cycle() -> None:
    root = Path(targets.__file__).parent.parent
    modules = {
        ".".join(path.relative_to(root).with_suffix("").parts): path
        for path in (root / "bench").rglob("*.py")
    }
    graph = {name: bench_imports(path) & modules.keys() for name, path in modules.items()}
    assert "bench.write_report" in graph["bench.run"]  # the edge that once went both ways
    done: set[str] = set()

    def visit(name: str, trail: tuple[str, ...]) -> None:
        assert name not in trail, f"import cycle: {' -> '.join((*trail, name))}"
        if name not in done:
            for other in sorted(graph[name]):
                visit(other, (*trail, name))
            done.add(name)

    for name in sorted(graph):
        visit(name, ())


def test_the_stacks_replicas_are_metered_at_the_addresses_up_wrote(tmp_path: Path) -> None:
    import os

    from hunyuan_serve.run.state import STATE_FILE, write_json_atomic

    assert (targets.replica_metrics(tmp_path), targets.ready_replicas(tmp_path)) == ([], 0)  # no state yet
    # Port 1 on loopback refuses at once: status's live in-flight probe finds nothing there.
    replicas = [
        {"name": "replica-0", "addr": "127.0.0.2:1", "state": "ready", "pid": os.getpid()},
        {"name": "replica-1", "addr": "127.0.0.3:1", "state": "starting", "pid": os.getpid()},
    ]
    state = {"running": True, "pid": os.getpid(), "replicas": replicas}
    write_json_atomic(tmp_path / STATE_FILE, state)
    assert targets.replica_metrics(tmp_path) == ["http://127.0.0.2:1/metrics", "http://127.0.0.3:1/metrics"]
    assert targets.ready_replicas(tmp_path) == 0  # not every replica is ready yet
    replicas[1]["state"] = "ready"
    write_json_atomic(tmp_path / STATE_FILE, state)
    assert targets.ready_replicas(tmp_path) == 2
    write_json_atomic(tmp_path / STATE_FILE, {**state, "running": False})
    assert targets.ready_replicas(tmp_path) == 0  # the `up` that wrote it is gone

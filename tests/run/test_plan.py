"""Replica plans: GPU groups and CPU cores, ports, environment, argv; and the pure modules stay pure."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hunyuan_serve.config import ConfigError, build_config
from hunyuan_serve.run.plan import cpu_groups, plan_replicas, with_replica_engine

RUN = Path("/run/hs")


def _plans(
    data: dict[str, object], gpus: list[int], cores: list[int]
) -> list[tuple[str, int, dict[str, str]]]:
    cfg = build_config(data, {})
    plans = plan_replicas(cfg, visible_gpus=gpus, cores=cores, run_dir=RUN, python="py")
    return [(p.device, p.port, dict(p.env)) for p in plans]


# What every GPU replica needs before anything imports torch: spawn (vLLM forks its engine core unless
# CUDA is already initialised, and a fork after CUDA dies), torch's NVML-based availability check (so
# is_available() does not initialise CUDA), and nvidia-smi's PCI numbering for CUDA's device indexes.
CUDA = {
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
    "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
}


def test_one_replica_per_visible_gpu() -> None:
    assert _plans({}, [0, 1, 2], [0, 1]) == [
        ("cuda:0", 8101, {"CUDA_VISIBLE_DEVICES": "0", **CUDA}),
        ("cuda:1", 8102, {"CUDA_VISIBLE_DEVICES": "1", **CUDA}),
        ("cuda:2", 8103, {"CUDA_VISIBLE_DEVICES": "2", **CUDA}),
    ]


def test_tensor_parallel_groups_devices() -> None:
    plans = _plans(
        {"gpus": "0,1,2,3", "engine": {"tensor_parallel_size": 2}, "base_port": 9000}, [0, 1, 2, 3], [0]
    )
    assert plans == [
        ("cuda:0,1", 9000, {"CUDA_VISIBLE_DEVICES": "0,1", **CUDA}),
        ("cuda:2,3", 9001, {"CUDA_VISIBLE_DEVICES": "2,3", **CUDA}),
    ]


def test_device_kind_comes_from_the_plan() -> None:
    gpu = plan_replicas(build_config({}, {}), visible_gpus=[0], cores=[0], run_dir=RUN, python="py")
    cpu = plan_replicas(build_config({}, {}), visible_gpus=[], cores=[0], run_dir=RUN, python="py")
    assert [(p.kind, p.gpus, p.cpus) for p in gpu] == [("cuda", (0,), ())]
    assert [(p.kind, p.gpus) for p in cpu] == [("cpu", ())]
    assert not {"CUDA_DEVICE_ORDER", "VLLM_WORKER_MULTIPROC_METHOD"} & dict(cpu[0].env).keys()


@pytest.mark.parametrize(("gpus", "device"), [([0, 1], "cuda"), ([], "cpu")])
def test_replicas_read_the_fetched_model_on_the_device_up_chose(gpus: list[int], device: str) -> None:
    cfg = build_config({}, {})
    plans = plan_replicas(cfg, visible_gpus=gpus, cores=[0], run_dir=RUN, python="py")
    engine = with_replica_engine(cfg, plans, "/hf/models--tencent--X/snapshots/abc", "tencent/X").engine
    assert (engine.device, engine.model, engine.served_model_name) == (
        device,
        "/hf/models--tencent--X/snapshots/abc",
        "tencent/X",
    )
    named = build_config({"engine": {"served_model_name": "mine"}}, {})
    assert with_replica_engine(named, plans, "/m", "tencent/X").engine.served_model_name == "mine"


def test_engine_device_forces_the_kind() -> None:
    assert [d for d, _, _ in _plans({"engine": {"device": "cpu"}, "replicas": 2}, [0, 1], [0, 1])] == [
        "cpu:0",
        "cpu:1",
    ]
    with pytest.raises(ConfigError, match=r"engine\.device: cuda, but nvidia-smi lists no GPU"):
        _plans({"engine": {"device": "cuda"}}, [], [0])


def test_uuids_and_mig_devices_name_gpus() -> None:
    uuids: dict[int | str, str] = {0: "GPU-aaaa-1111", 1: "GPU-bbbb-2222", "MIG-cccc": "MIG-cccc"}
    cfg = build_config({"gpus": "GPU-bbbb,MIG-cccc"}, {})
    plans = plan_replicas(
        cfg, visible_gpus=[0, 1, "MIG-cccc"], cores=[0], run_dir=RUN, python="py", gpu_uuids=uuids
    )
    # The replica gets the spelling the user gave: CUDA takes UUIDs (and their prefixes) as well.
    assert [dict(p.env)["CUDA_VISIBLE_DEVICES"] for p in plans] == ["GPU-bbbb", "MIG-cccc"]
    with pytest.raises(ConfigError, match="not visible"):
        plan_replicas(
            build_config({"gpus": "GPU-ffff"}, {}),
            visible_gpus=[0, 1],
            cores=[0],
            run_dir=RUN,
            python="py",
            gpu_uuids=uuids,
        )


def test_an_inherited_device_list_is_kept() -> None:
    # Slurm gave this job GPUs 2 and 3: up plans on those, with their own numbers.
    assert [env["CUDA_VISIBLE_DEVICES"] for _, _, env in _plans({}, [2, 3], [0])] == ["2", "3"]
    with pytest.raises(ConfigError, match=r"\[0\] not visible"):
        _plans({"gpus": "0"}, [2, 3], [0])


def test_visible_devices_that_do_not_divide_by_tensor_parallel_size_are_refused() -> None:
    with pytest.raises(ConfigError, match="3 devices do not split into groups of 2"):
        _plans({"engine": {"tensor_parallel_size": 2}}, [0, 1, 2], [0])


def test_addr_is_the_replica_host() -> None:
    cfg = build_config({"replica": {"host": "10.1.2.3"}}, {})
    (plan,) = plan_replicas(cfg, visible_gpus=[], cores=[0], run_dir=RUN, python="py")
    assert plan.addr == "10.1.2.3:8101"


def test_listed_gpus_must_be_visible() -> None:
    with pytest.raises(ConfigError, match=r"gpus: device\(s\) \[5\] not visible"):
        _plans({"gpus": "0,5"}, [0, 1], [0])


def test_cpu_replicas_get_their_own_cores() -> None:
    assert _plans({"replicas": 2}, [], [0, 1]) == [
        ("cpu:0", 8101, {"VLLM_CPU_OMP_THREADS_BIND": "0"}),
        ("cpu:1", 8102, {"VLLM_CPU_OMP_THREADS_BIND": "1"}),
    ]
    assert [d for d, _, _ in _plans({"replicas": 2}, [], list(range(8)))] == ["cpu:0-3", "cpu:4-7"]


def test_cpu_replicas_are_confined_to_their_cores_and_gpu_replicas_are_not() -> None:
    def cpus(data: dict[str, object], gpus: list[int], cores: list[int]) -> list[tuple[int, ...]]:
        cfg = build_config(data, {})
        return [p.cpus for p in plan_replicas(cfg, visible_gpus=gpus, cores=cores, run_dir=RUN, python="py")]

    assert cpus({"replicas": 2}, [], [0, 1]) == [(0,), (1,)]
    assert cpus({"replicas": 2}, [], [2, 3, 6, 7]) == [(2, 3), (6, 7)]
    assert cpus({"replicas": 1, "engine": {"tensor_parallel_size": 2}}, [], [0, 1, 2, 3]) == [(0, 1, 2, 3)]
    assert cpus({}, [0, 1], [0, 1]) == [(), ()]


@pytest.mark.parametrize(
    ("replicas", "tp", "cores", "expected"),
    [
        (1, 1, [0, 1, 2], [[[0, 1, 2]]]),
        (3, 1, [0, 1], [[[0]], [[1]], [[0]]]),  # more replicas than cores: they share, round robin
        (1, 2, [0, 1, 2, 3], [[[0, 1], [2, 3]]]),
    ],
)
def test_cpu_groups(replicas: int, tp: int, cores: list[int], expected: list[list[list[int]]]) -> None:
    assert cpu_groups(replicas, tp, cores) == expected


def test_argv_config_and_log_paths() -> None:
    cfg = build_config({"replicas": 1}, {})
    (plan,) = plan_replicas(cfg, visible_gpus=[], cores=[0], run_dir=RUN, python="/py")
    assert plan.argv == (
        "/py",
        "-m",
        "hunyuan_serve",
        "replica",
        "--config",
        "/run/hs/replica-0.yaml",
        "--port",
        "8101",
    )
    assert plan.log_path == RUN / "logs" / "replica-0.log"
    assert plan.addr == "127.0.0.1:8101"


def test_replica_port_may_not_be_the_public_port() -> None:
    with pytest.raises(ConfigError, match="public port 8080"):
        _plans({"replicas": 2, "base_port": 8079}, [], [0])


PURE = (
    "run/health.py",
    "run/plan.py",
    "edge/routing.py",
    "edge/render.py",
    "edge/layout.py",
    "edge/capacity.py",
    "edge/filters.py",
    "edge/dialects.py",
    "edge/upstream_tls.py",
    "edge/hold.py",
)
FORBIDDEN = {"asyncio", "subprocess", "httpx", "os", "time", "random", "signal", "socket"}


@pytest.mark.parametrize("name", PURE)
def test_pure_modules_import_no_effects(name: str) -> None:
    source = (Path(__file__).resolve().parents[2] / "hunyuan_serve" / name).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN
    assert not {m for m in imported if m.startswith(("hunyuan_serve.run.", "hunyuan_serve.edge."))} - {
        "hunyuan_serve.run.health",
        "hunyuan_serve.run.plan",
        *(f"hunyuan_serve.{p.removesuffix('.py').replace('/', '.')}" for p in PURE if p.startswith("edge/")),
    }

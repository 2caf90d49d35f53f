"""Replica plans: GPU groups and CPU cores, ports, environment, argv; and the pure modules stay pure."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hunyuan_serve.config import ConfigError, build_config
from hunyuan_serve.supervise.plan import cpu_groups, plan_replicas

RUN = Path("/run/hs")


def _plans(
    data: dict[str, object], gpus: list[int], cores: list[int]
) -> list[tuple[str, int, dict[str, str]]]:
    cfg = build_config(data, {})
    plans = plan_replicas(cfg, visible_gpus=gpus, cores=cores, run_dir=RUN, python="py")
    return [(p.device, p.port, dict(p.env)) for p in plans]


def test_one_replica_per_visible_gpu() -> None:
    assert _plans({}, [0, 1, 2], [0, 1]) == [
        ("cuda:0", 8101, {"CUDA_VISIBLE_DEVICES": "0"}),
        ("cuda:1", 8102, {"CUDA_VISIBLE_DEVICES": "1"}),
        ("cuda:2", 8103, {"CUDA_VISIBLE_DEVICES": "2"}),
    ]


def test_tensor_parallel_groups_devices() -> None:
    plans = _plans(
        {"gpus": "0,1,2,3", "engine": {"tensor_parallel_size": 2}, "base_port": 9000}, [0, 1, 2, 3], [0]
    )
    assert plans == [
        ("cuda:0,1", 9000, {"CUDA_VISIBLE_DEVICES": "0,1"}),
        ("cuda:2,3", 9001, {"CUDA_VISIBLE_DEVICES": "2,3"}),
    ]


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


PURE = ("health.py", "plan.py", "routing.py", "render.py")
FORBIDDEN = {"asyncio", "subprocess", "httpx", "os", "time", "random", "signal", "socket"}


@pytest.mark.parametrize("name", PURE)
def test_pure_modules_import_no_effects(name: str) -> None:
    source = (Path(__file__).resolve().parents[2] / "hunyuan_serve" / "supervise" / name).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN
    assert not {m for m in imported if m.startswith("hunyuan_serve.supervise.")} - {
        "hunyuan_serve.supervise.health",
        "hunyuan_serve.supervise.routing",
        "hunyuan_serve.supervise.plan",
    }

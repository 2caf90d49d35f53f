"""The engine section: how the vLLM engine is built."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    field_validator,
)

from hunyuan_serve.config.base import Section


class EngineConfig(Section):
    """How the vLLM engine is built (maps to vLLM's engine arguments)."""

    model: str | None = Field(
        None, description="Path or hub id of the model; empty means the embedded default for this machine."
    )
    # Chosen by `up` for each replica (cuda when it has GPUs), so a replica never asks torch, which
    # would initialise CUDA before vLLM forks its engine core (hunyuan_serve/gpu.py, CUDA_ENV).
    device: Literal["auto", "cuda", "cpu"] = Field(
        "auto", description="Where the engine runs; auto: cuda when nvidia-smi lists a GPU, else cpu."
    )
    revision: str | None = Field(None, description="Hub revision (branch, tag or commit) of a hub model.")
    download_dir: str | None = Field(
        None, description="Where `up` downloads a hub model (default: the Hugging Face cache, HF_HOME)."
    )
    tokenizer: str | None = Field(None, description="Tokenizer path or id, if not the model's.")
    served_model_name: str | None = Field(None, description="Name reported in responses and cache keys.")
    dtype: str = Field("auto", description="Weights/compute dtype: auto, float16, bfloat16, float32.")
    max_model_len: int | None = Field(None, gt=0, description="Context length (prompt + output tokens).")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="Fraction of GPU memory for vLLM.")
    quantization: str | None = Field(None, description="vLLM quantization method, e.g. fp8.")
    kv_cache_dtype: str = Field("auto", description="KV-cache dtype, e.g. auto or fp8.")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs per replica.")
    max_num_seqs: int = Field(256, ge=1, description="Most sequences the engine batches at once.")
    max_num_batched_tokens: int | None = Field(
        None,
        ge=1,
        description="Most tokens one engine step takes, a long prompt's chunk (chunked prefill): a smaller "
        "budget keeps each step of a long prompt short on a CPU (default: vLLM's).",
    )
    # Interactive requests (priority 0) are scheduled before waiting bulk ones (1): a person in the page
    # does not wait behind a file job's batches.
    scheduling_policy: Literal["fcfs", "priority"] = Field(
        "priority", description="vLLM's scheduler: priority (interactive before bulk) or fcfs."
    )
    enforce_eager: bool | None = Field(
        None, description="Skip graph capture/compilation (faster start); default: on for CPU, off for GPU."
    )
    kv_cache_memory_bytes: int | None = Field(
        None, gt=0, description="KV-cache size in bytes (CPU builds; overrides the GiB setting)."
    )
    # Without a size, vLLM's CPU build reserves 92% of the host's memory and refuses to start
    # beside anything else, a second replica included.
    cpu_kvcache_space_gib: int = Field(
        2, ge=1, description="KV-cache GiB per replica on CPU (unless kv_cache_memory_bytes is set)."
    )
    # vLLM's CPU build runs the model in a worker process of its own beside the engine core (its
    # platform turns the "uni" executor into "mp" while V1 multiprocessing is on); a GPU engine of one
    # device runs it inside the engine core. Here one core then holds three processes per replica.
    cpu_worker_process: bool = Field(
        False,
        description="CPU, one device: run the model in a worker process of its own (vLLM's CPU default) "
        "instead of inside the engine core process, as on a GPU. Off: one process less per replica, "
        "which starts in about half the time and uses about a sixth less CPU per string; the job's "
        "throughput measured the same (2 CPU cores, the like-for-like job row).",
    )
    cpu_fork_engine_core: bool = Field(
        True,
        description="CPU, one device, no worker process: fork vLLM's engine core from the replica "
        "instead of the spawn vLLM's CPU platform sets; the core then does not import torch and vLLM "
        "again, and a replica starts about 5 s sooner. In the core, the HTTP front's sockets (listening ones "
        "and TCP connections) are closed.",
    )
    seed: int = Field(0, description="Engine sampling seed.")
    prompt_family: Literal[
        "auto", "hunyuan-mt", "hy-mt1.5", "hy-mt2", "few-shot", "chimera", "hunyuan", "few_shot"
    ] = Field(
        "auto",
        description="Prompt family: auto (from the checkpoint's name and config), hunyuan-mt, "
        "hy-mt1.5, hy-mt2 (each generation's official templates), few-shot (base models); "
        "hunyuan and few_shot: old names of hunyuan-mt and few-shot.",
    )
    trust_remote_code: bool = Field(False, description="Allow model code from the checkpoint.")
    shutdown_timeout_s: float = Field(
        3.0,
        ge=0,
        description="On replica exit, time the engine's processes get to stop after SIGTERM before they "
        "are killed (vLLM's own default is 5 s, past which a drained replica outlived kill_timeout_s).",
    )
    # Measures the serving layer's own cost, with no model time in it (bench/layer.py); /health and the
    # logs say it is on.
    stand_in: bool = Field(
        False,
        description="Answer with an engine stand-in instead of vLLM: the chat template and tokenizer run, "
        "no model does (echoes the text's last tokens at once). For measuring the serving layer only.",
    )
    stand_in_output_tokens: int = Field(
        16, ge=1, description="Tokens the stand-in reports as generated per answer (at most max_tokens)."
    )

    @field_validator("quantization")
    @classmethod
    def _no_experts_int8(cls, value: str | None) -> str | None:
        if value == "experts_int8":
            raise ValueError("experts_int8 breaks Hunyuan-MT's dense model output; use fp8 or none")
        return value

"""Gathering doctor's facts: the effects (package metadata, nvidia-smi, the model's config, disk, ports)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from hunyuan_serve.auth.secret_files import exposed_secrets, secret_paths
from hunyuan_serve.compile_cache import compile_facts
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.demo_model import demo_model_state
from hunyuan_serve.doctor.rows import Facts
from hunyuan_serve.edge.tls import check_pair
from hunyuan_serve.gpu import DeviceId
from hunyuan_serve.replica.engine.internals import installed_vllm


def installed_torch() -> tuple[str, str | None] | None:
    """torch's version and CUDA from torch/version.py, read without importing torch (as vLLM's
    env_override.py does: importing it loads the CUDA libraries)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    text = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text(encoding="utf-8")
    version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
    cuda = re.search(r"^cuda\b[^=\n]*=\s*['\"]([^'\"]+)", text, re.M)
    return (version.group(1) if version else "?", cuda.group(1) if cuda else None)


def _disk_free(path: Path) -> int | None:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return shutil.disk_usage(candidate).free
    return None


def _writable(path: Path) -> bool:
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    return os.access(existing, os.W_OK)


def gather(
    cfg: ServeConfig, model: str, device: str, devices: Sequence[DeviceId], ports: Sequence[tuple[str, int]]
) -> Facts:
    """Ask the host: packages, nvidia-smi, the model's config (one small file), disk, nginx, ports."""
    from hunyuan_serve import models
    from hunyuan_serve.gpu import query_gpus
    from hunyuan_serve.run.ports import port_problem

    cache = models.hub_cache_dir(cfg.engine)
    config, error = None, None
    try:
        if model:
            config = models.model_config(
                model, cfg.engine.revision, cache if cfg.engine.download_dir else None
            )
    except models.ModelError as err:
        error = str(err)
    local = not model or not models.is_hub_id(model)
    demo_path, demo_state = demo_model_state(os.environ)
    return Facts(
        python=(sys.version_info.major, sys.version_info.minor, sys.version_info.micro),
        device=device,
        vllm=installed_vllm(),
        torch=installed_torch(),
        gpu=query_gpus(),
        devices=tuple(devices),
        utilization=cfg.engine.gpu_memory_utilization,
        model=model,
        model_local=local,
        model_config=config,
        model_error=error,
        prompt_family=cfg.engine.prompt_family,
        download_bytes=0 if local else models.download_size(model, cfg.engine.revision, cache),
        disk_free_bytes=_disk_free(cache),
        cache_dir=str(cache),
        cache_writable=_writable(cache),
        nginx=shutil.which(cfg.nginx.binary),
        nginx_binary=cfg.nginx.binary,
        ports=tuple((host, port, port_problem(host, port)) for host, port in ports),
        **compile_facts(cfg, device),
        tls=check_pair(cfg.nginx),
        secret_files=tuple(key for key, _ in secret_paths(cfg)),
        exposed=tuple(exposed_secrets(cfg)),
        demo_path=str(demo_path),
        demo_state=demo_state,
    )

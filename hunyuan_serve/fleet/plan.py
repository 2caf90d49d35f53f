"""Which replicas `up` runs: devices or cores, ports, environment and argv of each; deterministic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hunyuan_serve.config import DEFAULT_POOL, ConfigError, ServeConfig, split_devices
from hunyuan_serve.cores import core_ranges
from hunyuan_serve.gpu import CUDA_ENV, DeviceId


@dataclass(frozen=True)
class ReplicaPlan:
    """One replica: what it runs on and how it is launched."""

    index: int
    name: str
    device: str  # "cuda:0,1" or "cpu:0-3", for humans and `status`
    port: int
    env: tuple[tuple[str, str], ...]  # added to the supervisor's environment
    argv: tuple[str, ...]
    config_path: Path  # the effective config this replica reads
    log_path: Path
    # CPU replicas run on their own cores only. Not just the decode threads: MKL counts cores at
    # `import torch` by pinning the process to each allowed CPU in turn, and a replica starting on
    # a core where another replica's worker spins was left without CPU for minutes.
    cpus: tuple[int, ...] = ()  # empty: no restriction (GPU replicas)
    gpus: tuple[DeviceId, ...] = ()  # the devices of a GPU replica, as its CUDA_VISIBLE_DEVICES names them
    host: str = "127.0.0.1"  # the address the replica binds (replica.host)
    pool: str = DEFAULT_POOL  # the pool (config `pools`) whose model it serves

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def kind(self) -> str:
        """The engine.device this replica's config gets: up decides, the replica never asks torch."""
        return "cuda" if self.gpus else "cpu"


def _visible(wanted: DeviceId, visible: Sequence[DeviceId], uuids: Mapping[DeviceId, str]) -> bool:
    """A requested id names a visible device: the same index or UUID, or the (prefix of the) UUID of
    a device listed by index."""
    for v in visible:
        if str(wanted) == str(v):
            return True
        if isinstance(wanted, str) and uuids.get(v, "").startswith(wanted):
            return True
    return False


def device_groups(
    cfg: ServeConfig, visible_gpus: Sequence[DeviceId], uuids: Mapping[DeviceId, str] | None = None
) -> list[tuple[DeviceId, ...]]:
    """GPU groups of tensor_parallel_size, one per replica; empty on a machine without GPUs (or when
    engine.device is cpu)."""
    if cfg.engine.device == "cpu":
        return []
    gpus = list(cfg.gpus) if cfg.gpus is not None else list(visible_gpus)
    if cfg.engine.device == "cuda" and not gpus:
        raise ConfigError("engine.device: cuda, but nvidia-smi lists no GPU this process may use")
    if cfg.gpus is not None and visible_gpus:
        missing = [g for g in gpus if not _visible(g, visible_gpus, uuids or {})]
        if missing:
            raise ConfigError(f"gpus: device(s) {missing} not visible (visible: {list(visible_gpus)})")
    return split_devices(gpus, cfg.engine.tensor_parallel_size)


def cpu_groups(replicas: int, tp: int, cores: Sequence[int]) -> list[list[list[int]]]:
    """Cores of each replica, split per tensor-parallel rank; replicas share cores only when too few."""
    if not cores:
        raise ConfigError("no CPU cores available to pin replicas to")
    ordered = sorted(cores)
    slots = replicas * tp
    per = max(1, len(ordered) // slots)
    groups = []
    for r in range(replicas):
        ranks = []
        for t in range(tp):
            slot = r * tp + t
            if slots <= len(ordered):
                ranks.append(ordered[slot * per : (slot + 1) * per])
            else:
                ranks.append([ordered[slot % len(ordered)]])
        groups.append(ranks)
    return groups


def plan_replicas(
    cfg: ServeConfig,
    *,
    visible_gpus: Sequence[DeviceId],
    cores: Sequence[int],
    run_dir: Path,
    python: str,
    gpu_uuids: Mapping[DeviceId, str] | None = None,
) -> list[ReplicaPlan]:
    """One plan per replica: GPU groups when there are GPUs, else cfg.replicas CPU replicas."""
    groups = device_groups(cfg, visible_gpus, gpu_uuids)
    plans: list[ReplicaPlan] = []
    count = len(groups) if groups else cfg.replicas
    cpu = cpu_groups(count, cfg.engine.tensor_parallel_size, cores) if not groups else []
    for i in range(count):
        port = cfg.base_port + i
        if port > 65535:
            raise ConfigError(f"base_port: {cfg.base_port} leaves no port for replica {i}")
        if port == cfg.nginx.port:
            raise ConfigError(f"base_port: replica {i} would take the public port {port} (nginx.port)")
        if groups:
            ids = ",".join(str(g) for g in groups[i])
            device = f"cuda:{ids}"
            env: tuple[tuple[str, str], ...] = (("CUDA_VISIBLE_DEVICES", ids), *CUDA_ENV)
            cpus: tuple[int, ...] = ()
        else:
            bind = "|".join(core_ranges(rank) for rank in cpu[i])
            device = f"cpu:{bind}"
            env = (("VLLM_CPU_OMP_THREADS_BIND", bind),)
            cpus = tuple(sorted({core for rank in cpu[i] for core in rank}))
        name = f"replica-{i}"
        config_path = run_dir / f"{name}.yaml"
        argv = (python, "-m", "hunyuan_serve", "replica", "--config", str(config_path), "--port", str(port))
        log_path = run_dir / "logs" / f"{name}.log"
        gpus = groups[i] if groups else ()
        plans.append(
            ReplicaPlan(i, name, device, port, env, argv, config_path, log_path, cpus, gpus, cfg.replica.host)
        )
    return plans


def with_replica_engine(
    cfg: ServeConfig, plans: Sequence[ReplicaPlan], local_model: str, name: str
) -> ServeConfig:
    """The config every replica reads: the model as `up` fetched it (a local directory, so no replica
    downloads), served under the name the user gave, on the device kind `up` chose (never torch's guess)."""
    engine = {
        "model": local_model,
        "served_model_name": cfg.engine.served_model_name or name,
        "device": "cuda" if any(p.gpus for p in plans) else "cpu",
    }
    return cfg.model_copy(update={"engine": cfg.engine.model_copy(update=engine)})

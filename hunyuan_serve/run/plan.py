"""Which replicas `up` runs, pool by pool: devices or cores, ports, environment, argv and config of each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hunyuan_serve.config import DEFAULT_POOL, ConfigError, Pool, ServeConfig, resolve_pools, split_devices
from hunyuan_serve.cores import core_ranges
from hunyuan_serve.gpu import CUDA_ENV, DeviceId
from hunyuan_serve.models import served_name
from hunyuan_serve.replica.engine import variables


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


def cpu_slots(tps: Sequence[int], cores: Sequence[int]) -> list[list[list[int]]]:
    """Cores of each CPU replica (of every pool), split per tensor-parallel rank; replicas share cores
    only when there are too few."""
    if not cores:
        raise ConfigError("no CPU cores available to pin replicas to")
    ordered = sorted(cores)
    slots = sum(tps)
    per = max(1, len(ordered) // slots)
    groups, slot = [], 0
    for tp in tps:
        ranks = []
        for _ in range(tp):
            if slots <= len(ordered):
                ranks.append(ordered[slot * per : (slot + 1) * per])
            else:
                ranks.append([ordered[slot % len(ordered)]])
            slot += 1
        groups.append(ranks)
    return groups


def cpu_groups(replicas: int, tp: int, cores: Sequence[int]) -> list[list[list[int]]]:
    """Cores of each of `replicas` replicas of one tensor_parallel_size."""
    return cpu_slots([tp] * replicas, cores)


def pool_devices(
    pools: Sequence[Pool], visible_gpus: Sequence[DeviceId], uuids: Mapping[DeviceId, str] | None
) -> list[list[tuple[DeviceId, ...]]]:
    """Each pool's GPU groups (empty: its replicas run on CPU). A lone pool takes every visible GPU by
    default; beside others a pool on GPUs names its own (config refuses a GPU in two pools)."""
    layout = [device_groups(pool.cfg, visible_gpus, uuids) for pool in pools]
    for pool, groups in zip(pools, layout, strict=True):
        if len(pools) > 1 and groups and pool.cfg.gpus is None:
            raise ConfigError(
                f"pools.{pool.name}.gpus: several pools on a machine with GPUs: name each pool's "
                "devices (--pool NAME=MODEL:gpus=0,1), or set its engine.device: cpu"
            )
    return layout


def replica_name(cfg: ServeConfig, pool: str, n: int) -> str:
    """replica-N without a `pools` section (as always), POOL-N for the replicas of a named pool."""
    return f"{pool}-{n}" if cfg.pools else f"replica-{n}"


def _port(cfg: ServeConfig, i: int) -> int:
    port = cfg.base_port + i
    if port > 65535:
        raise ConfigError(f"base_port: {cfg.base_port} leaves no port for replica {i}")
    if port == cfg.nginx.port:
        raise ConfigError(f"base_port: replica {i} would take the public port {port} (nginx.port)")
    return port


def plan_replicas(
    cfg: ServeConfig,
    *,
    visible_gpus: Sequence[DeviceId],
    cores: Sequence[int],
    run_dir: Path,
    python: str,
    gpu_uuids: Mapping[DeviceId, str] | None = None,
) -> list[ReplicaPlan]:
    """One plan per replica, pool after pool (resolve_pools): GPU groups when the pool has GPUs, else
    its `replicas` CPU replicas; ports contiguous from base_port across pools, cores split among every
    CPU replica of every pool."""
    pools = resolve_pools(cfg)
    layout = pool_devices(pools, visible_gpus, gpu_uuids)
    tps = [
        pool.cfg.engine.tensor_parallel_size
        for pool, groups in zip(pools, layout, strict=True)
        if not groups
        for _ in range(pool.cfg.replicas)
    ]
    cpu = iter(cpu_slots(tps, cores) if tps else [])
    plans: list[ReplicaPlan] = []
    for pool, groups in zip(pools, layout, strict=True):
        for n in range(len(groups) or pool.cfg.replicas):
            i, name = len(plans), replica_name(cfg, pool.name, n)
            port = _port(cfg, i)
            if groups:
                ids = ",".join(str(g) for g in groups[n])
                device = f"cuda:{ids}"
                env: tuple[tuple[str, str], ...] = (("CUDA_VISIBLE_DEVICES", ids), *CUDA_ENV)
                cpus: tuple[int, ...] = ()
            else:
                ranks = next(cpu)
                bind = "|".join(core_ranges(rank) for rank in ranks)
                device, env = f"cpu:{bind}", ((variables.CPU_OMP_THREADS_BIND, bind),)
                cpus = tuple(sorted({core for rank in ranks for core in rank}))
            config_path = run_dir / f"{name}.yaml"
            argv = (
                python,
                "-m",
                "hunyuan_serve",
                "replica",
                "--config",
                str(config_path),
                "--port",
                str(port),
            )
            log_path = run_dir / "logs" / f"{name}.log"
            gpus = groups[n] if groups else ()
            host = pool.cfg.replica.host
            plans.append(
                ReplicaPlan(
                    i, name, device, port, env, argv, config_path, log_path, cpus, gpus, host, pool.name
                )
            )
    return plans


def pool_engine(
    cfg: ServeConfig, plans: Sequence[ReplicaPlan], local_model: str, name: str
) -> dict[str, Any]:
    """The engine settings `up` places on one pool: the model as it fetched it (a local directory, so no
    replica downloads), served under the name the user gave, on the device kind `up` chose for the
    pool's replicas (never torch's guess)."""
    return {
        "model": local_model,
        "served_model_name": served_name(name, cfg.engine.served_model_name),
        "device": "cuda" if any(p.gpus for p in plans) else "cpu",
    }


def with_pool_engine(cfg: ServeConfig, pool: str, engine: Mapping[str, Any]) -> ServeConfig:
    """The stack's config with engine settings placed on one pool (without a `pools` section: on the
    top-level engine), so that resolve_pools gives every pool's replicas, Nginx and `status` the same."""
    if not cfg.pools:
        return cfg.model_copy(update={"engine": cfg.engine.model_copy(update=dict(engine))})
    pools = tuple(
        p.model_copy(update={"engine": {**p.engine, **engine}, "model": engine.get("model", p.model)})
        if p.name == pool
        else p
        for p in cfg.pools
    )
    return cfg.model_copy(update={"pools": pools})


def with_replica_engine(
    cfg: ServeConfig, plans: Sequence[ReplicaPlan], local_model: str, name: str
) -> ServeConfig:
    """The config of a one-model stack with its engine placed (pool_engine)."""
    return with_pool_engine(cfg, DEFAULT_POOL, pool_engine(cfg, plans, local_model, name))


def pools_of(cfg: ServeConfig) -> dict[str, Pool]:
    """Each pool by name, its effective config (what its replicas read, but their port)."""
    return {pool.name: pool for pool in resolve_pools(cfg)}


def replica_config(pool: Pool, port: int) -> ServeConfig:
    """The config one replica reads: its pool's effective config, on its own port."""
    data = pool.cfg.model_dump(mode="json")
    data["replica"]["port"] = port
    if pool.chimera_pool and not data["replica"].get("chimera_url"):
        data["replica"]["chimera_url"] = chimera_url(pool.cfg, pool.chimera_pool)
    return ServeConfig.model_validate(data)


def loopback_for(listen: str) -> str:
    """Where this machine reaches a server listening on `listen`."""
    if listen in ("0.0.0.0", "*", ""):
        return "127.0.0.1"
    if listen in ("::", "[::]"):
        return "[::1]"
    return f"[{listen}]" if ":" in listen and not listen.startswith("[") else listen


def chimera_url(cfg: ServeConfig, chimera_pool: str) -> str:
    """Where a pool's replicas send ensemble candidates: their own host's Nginx route to the Chimera
    pool (/_hs/pool/NAME/), so the fusion gets the pool's retries and only ready replicas."""
    return f"http://{loopback_for(cfg.nginx.listen)}:{cfg.nginx.port}/_hs/pool/{chimera_pool}"

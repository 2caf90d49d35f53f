"""The whole config of `up` and its pools: each pool's effective config, resolved and checked."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from hunyuan_serve.config.base import ConfigError, Section, validation_problems
from hunyuan_serve.config.devices import gpus_value, split_devices
from hunyuan_serve.config.edge import AuthConfig, NginxConfig
from hunyuan_serve.config.engine import EngineConfig
from hunyuan_serve.config.operations import LogsConfig, SupervisorConfig
from hunyuan_serve.config.qa import POOL_CONTEXT
from hunyuan_serve.config.replica import ReplicaConfig

POOL_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
DEFAULT_POOL = "default"  # the name of the one pool that today's single-model settings describe
HOST_WIDE_REPLICA_KEYS = ("tls_cert", "tls_key")  # replica keys a pool may not set (PoolConfig)


class PoolConfig(Section):
    """One model served by replicas of its own: the top-level sections with this pool's overrides."""

    name: str = Field(description="The pool's name: lowercase letters, digits and '-', a letter first.")
    model: str | None = Field(None, description="Path or hub id of the pool's model (its engine.model).")
    replicas: int | None = Field(
        None, ge=1, description="Replicas on a machine without GPUs (default: replicas)."
    )
    gpus: tuple[int | str, ...] | None = Field(None, description="The pool's CUDA devices (default: gpus).")
    engine: dict[str, Any] = Field(default_factory=dict, description="engine keys over the top-level ones.")
    replica: dict[str, Any] = Field(default_factory=dict, description="replica keys over the top-level ones.")
    chimera_pool: str | None = Field(None, description="The pool that fuses this pool's ensemble candidates.")

    @field_validator("name")
    @classmethod
    def _dns_name(cls, value: str) -> str:
        # It names an Nginx upstream, a Kubernetes Deployment and a Prometheus label value.
        if not POOL_NAME.match(value):
            raise ValueError(f"{value!r}: lowercase letters, digits and '-', a letter first, at most 31")
        return value

    @field_validator("gpus", mode="before")
    @classmethod
    def _parse_gpus(cls, value: Any) -> Any:
        return gpus_value(value)

    @model_validator(mode="after")
    def _host_wide_tls(self) -> PoolConfig:
        # The host's Nginx reaches every replica of it one way and its listing tells the gateway so, both
        # from the top-level pair: a pool's own pair would leave that pool proxied in plain HTTP to a TLS
        # port, never ready.
        named = [key for key in HOST_WIDE_REPLICA_KEYS if key in self.replica]
        if named:
            keys = " and ".join(f"pools.{self.name}.replica.{key}" for key in named)
            raise ValueError(
                f"{keys}: TLS on the replicas is host-wide; set replica.tls_cert and replica.tls_key at the "
                "top level (every pool's replicas then listen with it), not in a pool"
            )
        return self


class ServeConfig(Section):
    """Everything `up` needs: devices, replicas and every section above."""

    gpus: tuple[int | str, ...] | None = Field(
        None, description="CUDA devices (indexes or GPU-/MIG- UUIDs); empty means all visible ones."
    )
    replicas: int = Field(1, ge=1, description="Replicas on a machine without GPUs.")
    base_port: int = Field(8101, ge=1, le=65535, description="Loopback port of the first replica.")
    run_dir: str = Field("", description="Where configs, logs and state go (default: per-user run dir).")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log level.")
    engine: EngineConfig = Field(default_factory=EngineConfig)
    replica: ReplicaConfig = Field(default_factory=ReplicaConfig)
    supervisor: SupervisorConfig = Field(default_factory=SupervisorConfig)
    nginx: NginxConfig = Field(default_factory=NginxConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    logs: LogsConfig = Field(default_factory=LogsConfig)
    pools: tuple[PoolConfig, ...] = Field(
        (), description="Several models, each with its own replicas (empty: one pool of the settings above)."
    )
    default_pool: str | None = Field(
        None, description="The pool a request naming no model goes to (default: the first)."
    )

    @field_validator("run_dir")
    @classmethod
    def _absolute_run_dir(cls, value: str) -> str:
        # Nginx reads its prefix relative to itself (rel/nginx/rel/nginx.conf), and replicas and reloads
        # read the run dir from elsewhere: one absolute path from the start.
        return str(Path(value).expanduser().absolute()) if value else value

    @field_validator("gpus", mode="before")
    @classmethod
    def _parse_gpus(cls, value: Any) -> Any:
        return gpus_value(value)

    @model_validator(mode="after")
    def _gpus_fit_tensor_parallel(self) -> ServeConfig:
        if self.gpus is not None:
            if self.gpus and self.engine.device == "cpu":  # one would silently win over the other
                raise ConfigError(f"gpus {list(self.gpus)} with engine.device: cpu: drop one of the two")
            split_devices(self.gpus, self.engine.tensor_parallel_size)
        return self

    @model_validator(mode="after")
    def _pools_resolve(self, info: ValidationInfo) -> ServeConfig:
        # Every pool's effective config validates, names and devices are unique. A pool's own config
        # (validated inside this check, context "pool") is checked as a pool, by its parent.
        if not (info.context or {}).get("pool"):
            resolve_pools(self)
        return self


@dataclass(frozen=True)
class Pool:
    """One pool as `up` runs it: its name and the whole config its replicas are planned from."""

    name: str
    cfg: ServeConfig  # the top-level config with the pool's overrides, `pools` emptied
    chimera_pool: str | None = None


def _pool_config(cfg: ServeConfig, pool: PoolConfig) -> ServeConfig:
    # Which pool is which is the whole config's to say; a pool's own config is one pool, named default.
    data = cfg.model_dump(exclude={"pools": True, "default_pool": True, "nginx": {"dialect_pool"}})
    engine = {**data["engine"], **pool.engine, **({"model": pool.model} if pool.model else {})}
    data.update(engine=engine, replica={**data["replica"], **pool.replica})
    if pool.replicas is not None:
        data["replicas"] = pool.replicas
    if pool.gpus is not None:
        data["gpus"] = pool.gpus
    try:
        return ServeConfig.model_validate(data, context={POOL_CONTEXT: pool.name})
    except ValidationError as err:
        problems = "; ".join(f"pools.{pool.name}.{part}" for part in validation_problems(err).split("; "))
        raise ValueError(problems) from None
    except ConfigError as err:
        raise ValueError(f"pools.{pool.name}: {err}") from None


def _check_pool_names(cfg: ServeConfig) -> None:
    names = [p.name for p in cfg.pools]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"pools: the name {name!r} is repeated")
    if cfg.default_pool is not None and cfg.default_pool not in (names or [DEFAULT_POOL]):
        raise ValueError(
            f"default_pool: {cfg.default_pool!r} is not a pool (pools: {names or [DEFAULT_POOL]})"
        )
    if cfg.nginx.dialect_pool is not None and cfg.nginx.dialect_pool not in (names or [DEFAULT_POOL]):
        raise ValueError(
            f"nginx.dialect_pool: {cfg.nginx.dialect_pool!r} is not a pool (pools: {names or [DEFAULT_POOL]})"
        )
    for p in cfg.pools:
        if p.chimera_pool is not None and (p.chimera_pool not in names or p.chimera_pool == p.name):
            raise ValueError(f"pools.{p.name}.chimera_pool: {p.chimera_pool!r} is not another pool")


def _check_pool_ensembles(pools: Sequence[Pool]) -> None:
    for pool in pools:
        rcfg = pool.cfg.replica
        if pool.chimera_pool and rcfg.chimera_timeout_s >= rcfg.request_timeout_s:
            # ReplicaConfig checks this once chimera_url is set; up sets it from chimera_pool later.
            raise ValueError(
                f"pools.{pool.name}.replica.chimera_timeout_s ({rcfg.chimera_timeout_s:g}) must be under "
                f"its request_timeout_s ({rcfg.request_timeout_s:g}): a stuck Chimera must leave time to "
                "answer the candidate"
            )
        fuses = pool.chimera_pool or pool.cfg.replica.chimera_url
        if pool.cfg.replica.ensemble_candidates and not fuses:
            where = f"pools.{pool.name}." if pool.name != DEFAULT_POOL else ""
            raise ValueError(
                f"{where}replica.ensemble_candidates: no Chimera pool to fuse the candidates "
                f"(set {where + 'chimera_pool' if where else 'replica.chimera_url'})"
            )


def _check_pool_devices(pools: Sequence[Pool]) -> None:
    owner: dict[str, str] = {}
    for pool in pools:
        for gpu in pool.cfg.gpus or ():
            if str(gpu) in owner:
                raise ValueError(f"pools.{pool.name}.gpus: GPU {gpu} is already pool {owner[str(gpu)]}'s")
            owner[str(gpu)] = pool.name


def resolve_pools(cfg: ServeConfig) -> tuple[Pool, ...]:
    """The pools in config order; without a `pools` section the one pool of the top-level settings."""
    if not cfg.pools:
        _check_pool_names(cfg)
        _check_pool_ensembles([Pool(DEFAULT_POOL, cfg)])
        return (Pool(DEFAULT_POOL, cfg),)
    _check_pool_names(cfg)
    pools = tuple(Pool(p.name, _pool_config(cfg, p), p.chimera_pool) for p in cfg.pools)
    _check_pool_devices(pools)
    _check_pool_ensembles(pools)
    return pools


def default_pool(cfg: ServeConfig) -> str:
    """The pool of a request that names no model."""
    return cfg.default_pool or (cfg.pools[0].name if cfg.pools else DEFAULT_POOL)

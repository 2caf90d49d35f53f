"""Where `up` places its replicas on this machine, and each pool's model fetched and family known."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hunyuan_serve.config import ConfigError, ServeConfig

if TYPE_CHECKING:
    from hunyuan_serve.run.plan import ReplicaPlan
    from hunyuan_serve.supervise.reload import Prepared


def plan_here(cfg: ServeConfig, run_dir: Path) -> list[ReplicaPlan]:
    """The replicas' plans on this machine's GPUs (as CUDA_VISIBLE_DEVICES limits them) or cores."""
    from hunyuan_serve import gpu
    from hunyuan_serve.run.plan import plan_replicas

    facts = gpu.query_gpus()
    return plan_replicas(
        cfg,
        visible_gpus=gpu.selectable(facts, os.environ.get("CUDA_VISIBLE_DEVICES")),
        cores=sorted(os.sched_getaffinity(0)),
        run_dir=run_dir,
        python=sys.executable,
        gpu_uuids=gpu.uuids_of(facts),
    )


def placed_here(cfg: ServeConfig, run_dir: Path, fetch: bool = True) -> tuple[ServeConfig, list[ReplicaPlan]]:
    """The facts of this machine `up` builds its configs from: the replicas' plans (GPUs nvidia-smi
    lists, or cores) and the config with each pool's model, family and device placed. `render nginx`
    takes the same (fetch False: no model download), so it prints what `up` writes."""
    plans = plan_here(cfg, run_dir)
    placed, _ = place_pools(cfg, plans, pool_models(cfg, plans), fetch)
    return placed, plans


def checkpoint_family(cfg: ServeConfig, local: str) -> str:
    """The prompt family placed once, on the fetched checkpoint, and written into the config: the
    replicas, `status` and Nginx's /health all read it."""
    from hunyuan_serve.models import model_config, model_family

    return model_family(cfg.engine.prompt_family, local, model_config(local, cfg.engine.revision))


def pool_models(cfg: ServeConfig, plans: Sequence[ReplicaPlan]) -> dict[str, str]:
    """The model each pool serves, as given (or the default of its replicas' device)."""
    from hunyuan_serve.config import resolve_pools
    from hunyuan_serve.models import resolve_model

    return {
        pool.name: resolve_model(
            pool.cfg.engine, any(p.gpus for p in plans if p.pool == pool.name), sys.stderr
        )
        for pool in resolve_pools(cfg)
    }


def place_pools(
    cfg: ServeConfig, plans: Sequence[ReplicaPlan], models: Mapping[str, str], fetch: bool = True
) -> tuple[ServeConfig, list[dict[str, Any]]]:
    """Each pool's model fetched (once, here, before any replica starts and so before their startup
    deadlines, not by N replicas at once) and its engine placed (pool_engine, the family); and what
    `status` shows of each pool. fetch False (`render`): a hub model is not downloaded, only its
    config.json read for the family; what Nginx is given (served name, family, device) is the same."""
    from hunyuan_serve.config import resolve_pools
    from hunyuan_serve.models import fetch_model
    from hunyuan_serve.run.plan import pool_engine, with_pool_engine

    ready, described = cfg, []
    for pool in resolve_pools(cfg):
        mine = [p for p in plans if p.pool == pool.name]
        model = models[pool.name]
        local = str(fetch_model(pool.cfg.engine, model)) if fetch else model
        engine = {
            **pool_engine(pool.cfg, mine, local, model),
            "prompt_family": checkpoint_family(pool.cfg, local),
        }
        ready = with_pool_engine(ready, pool.name, engine)
        replicas = [p.name for p in mine]
        described.append(
            {"name": pool.name, "model": model, "family": engine["prompt_family"], "replicas": replicas}
        )
    check_pool_roles(ready, {each["name"]: each["family"] for each in described})
    return ready, described


def check_pool_roles(cfg: ServeConfig, families: Mapping[str, str]) -> None:
    """Once each pool's family is known: a chimera_pool is a Chimera, and a Chimera (which only fuses)
    is neither the pool of requests that name no model nor the dialects' pool, nor asked to fuse."""
    from hunyuan_serve.config import default_pool, resolve_pools
    from hunyuan_serve.families import CHIMERA

    for pool in resolve_pools(cfg):
        target = pool.chimera_pool
        if target is not None and families.get(target) != CHIMERA:
            raise ConfigError(
                f"pools.{pool.name}.chimera_pool: pool {target} serves prompt family "
                f"{families.get(target)}, not a Hunyuan-MT-Chimera (family chimera): it cannot fuse"
            )
        if families.get(pool.name) == CHIMERA and pool.cfg.replica.ensemble_candidates:
            raise ConfigError(
                f"pools.{pool.name}.replica.ensemble_candidates: pool {pool.name} is the Chimera"
            )
    if len(families) > 1:
        for what, name in (
            ("default_pool", default_pool(cfg)),
            ("nginx.dialect_pool", cfg.nginx.dialect_pool),
        ):
            if name is not None and families.get(name) == CHIMERA:
                raise ConfigError(
                    f"{what}: pool {name} is a Chimera, which only fuses candidates; name a translation "
                    "pool (or list one first)"
                )


def pool_info(cfg: ServeConfig, described: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What `status` shows of the stack: every pool, and the default pool's model and family."""
    from hunyuan_serve.config import default_pool

    first = next(p for p in described if p["name"] == default_pool(cfg))
    return {"model": first["model"], "family": first["family"], "pools": [dict(p) for p in described]}


def prepare_reload(cfg: ServeConfig, run_dir: Path) -> Prepared:
    """What `up` does at start before a replica runs, for a reload: plans, each pool's model fetched and
    its family placed."""
    from hunyuan_serve.auth import open_listen_problem
    from hunyuan_serve.supervise.reload import Prepared

    plans = plan_here(cfg, run_dir)
    problem = open_listen_problem(cfg)
    if problem:
        raise ConfigError(problem)
    ready, described = place_pools(cfg, plans, pool_models(cfg, plans))
    return Prepared(ready, plans, pool_info(ready, described))

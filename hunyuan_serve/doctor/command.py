"""`hunyuan-serve doctor` and the preflight `up` shares with it: every row, per pool where it differs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hunyuan_serve.compile_cache import check_first_start, check_triton_build
from hunyuan_serve.config import ServeConfig, add_config_flags, config_from_args
from hunyuan_serve.doctor import host
from hunyuan_serve.doctor.gather import gather
from hunyuan_serve.doctor.rows import Check, Facts, format_checks
from hunyuan_serve.doctor.tls import SECRET_ROW, check_secret_files, check_tls

# Each check gives its row, or its rows where it checks several things (one row per TLS problem).
CHECKS: tuple[Callable[[Facts], Check | list[Check]], ...] = (
    host.check_python,
    host.check_vllm,
    host.check_torch,
    host.check_driver,
    host.check_capability,
    host.check_gpu_memory,
    host.check_disk,
    host.check_cache,
    host.check_nginx,
    host.check_ports,
    host.check_model,
    check_triton_build,
    check_first_start,
    check_secret_files,
    check_tls,
)


def run_checks(facts: Facts) -> list[Check]:
    rows: list[Check] = []
    for check in CHECKS:
        found = check(facts)
        rows += found if isinstance(found, list) else [found]
    return rows


def preflight(cfg: ServeConfig, plans: Sequence[Any], model: str) -> list[Check]:
    """The checks `up` and `doctor` share, for the replicas `up` would start (of one model)."""
    device = "cuda" if any(p.gpus for p in plans) else "cpu"
    devices = tuple(d for p in plans for d in p.gpus)
    ports = [(cfg.nginx.listen, cfg.nginx.port)] + [(cfg.replica.host, p.port) for p in plans]
    if cfg.nginx.tls_cert:  # the TLS listener's port too
        ports.insert(1, (cfg.nginx.listen, cfg.nginx.tls_port))
    return run_checks(gather(cfg, model, device, devices, ports))


# What differs from one pool to the next: its model, the disk and cache for it, its devices and ports.
PER_POOL = ("gpu memory", "disk for the model", "hf cache", "ports", "model")


def preflight_pools(cfg: ServeConfig, plans: Sequence[Any], models: Mapping[str, str]) -> list[Check]:
    """preflight per pool, on its effective config, model and replicas; with several pools each
    per-pool row is named after its pool and the host's rows come once."""
    from hunyuan_serve.config import resolve_pools

    pools = resolve_pools(cfg)
    if len(pools) == 1:
        return preflight(pools[0].cfg, plans, models[pools[0].name])
    rows: list[Check] = []
    for n, pool in enumerate(pools):
        for check in preflight(pool.cfg, [p for p in plans if p.pool == pool.name], models[pool.name]):
            if check.name in PER_POOL:
                rows.append(Check(f"{check.name} (pool {pool.name})", check.status, check.detail))
            elif n == 0:
                rows.append(check)
    return rows


def cmd_doctor(args: argparse.Namespace) -> int:
    import os

    from hunyuan_serve import gpu, models
    from hunyuan_serve.config import resolve_pools
    from hunyuan_serve.run.plan import plan_replicas

    cfg = config_from_args(args)
    facts = gpu.query_gpus()
    visible = gpu.selectable(facts, os.environ.get("CUDA_VISIBLE_DEVICES"))
    plans = plan_replicas(
        cfg,
        visible_gpus=visible,
        cores=sorted(os.sched_getaffinity(0)),
        run_dir=Path("/nonexistent"),
        python=sys.executable,
        gpu_uuids=gpu.uuids_of(facts),
    )
    # No GPU and no --model: `up` converts the embedded demo model, which is not looked at here.
    wanted = {}
    for pool in resolve_pools(cfg):
        on_gpu = any(p.gpus for p in plans if p.pool == pool.name)
        wanted[pool.name] = (
            models.resolve_model(pool.cfg.engine, True) if pool.cfg.engine.model or on_gpu else ""
        )
    checks = preflight_pools(cfg, plans, wanted)
    print(format_checks(checks))
    failed = [c.name for c in checks if c.failed]
    print(f"\n{len(failed)} check(s) failed: {', '.join(failed)}" if failed else "\nall checks passed")
    # A secret file others may read: exit 2, as `up`, `replica` and `gateway` refuse it (docs/security.md).
    return 2 if SECRET_ROW in failed else 1 if failed else 0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="Check this host before the first `up`: Python, vLLM/torch, GPUs, model, disk, nginx, ports.",
        description="A pass/fail table of what `up` needs on this host; exits 1 when a check fails, 2 when "
        "a secret file others may read is among them.",
    )
    add_config_flags(parser, ["top", "engine", "replica", "supervisor", "nginx", "auth"])
    parser.add_argument("--port", dest="nginx.port", default=argparse.SUPPRESS, help="Same as --nginx-port.")
    parser.set_defaults(func=cmd_doctor)

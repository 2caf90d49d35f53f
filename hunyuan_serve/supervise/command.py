"""`up`'s composition root: its start-up stages in order, then the supervisor on the real adapters."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hunyuan_serve.config import (
    ConfigError,
    ServeConfig,
    build_config,
    config_from_args,
    config_to_yaml,
    load_config_file,
)
from hunyuan_serve.config.replica import PARENT_PID_ENV
from hunyuan_serve.run.rundir import lock_run_dir, make_run_dir, run_dir_of, web_root, worker_user
from hunyuan_serve.supervise.placement import place_pools, plan_here, pool_info, pool_models, prepare_reload
from hunyuan_serve.supervise.preflight import busy_ports, clear_leftovers, tls_refusal
from hunyuan_serve.supervise.reload_client import SOURCE_FILE

if TYPE_CHECKING:
    from hunyuan_serve.edge.kept_tls import KeptPair
    from hunyuan_serve.run.events import JsonEvents
    from hunyuan_serve.run.plan import ReplicaPlan
    from hunyuan_serve.supervise.reload import Prepared, Source
    from hunyuan_serve.supervise.supervisor import Supervisor


def write_configs(cfg: ServeConfig, plans: Sequence[ReplicaPlan], run_dir: Path) -> None:
    """The effective config of `up` and of each replica (its pool's, on its own port), where they will
    read them."""
    from hunyuan_serve.run.plan import pools_of, replica_config
    from hunyuan_serve.run.state import write_text_atomic

    pools = pools_of(cfg)
    for plan in plans:
        write_text_atomic(plan.config_path, config_to_yaml(replica_config(pools[plan.pool], plan.port)))
    write_text_atomic(run_dir / "config.yaml", config_to_yaml(cfg))


def open_events(
    cfg: ServeConfig, plans: Sequence[ReplicaPlan], run_dir: Path, info: Mapping[str, Any]
) -> JsonEvents:
    """A new events file for this `up`, its first event naming what it runs (each pool's model)."""
    from hunyuan_serve.run import stacks
    from hunyuan_serve.run.events import JsonEvents

    path = run_dir / "events.jsonl"
    path.write_text("", encoding="utf-8")
    emit = JsonEvents(path)
    stacks.register(run_dir)  # so that `status` without --run-dir finds this stack, or names it
    devices = [p.device for p in plans]
    emit(
        "up",
        pid=os.getpid(),
        model=info["model"],
        pools=info["pools"],
        run_dir=str(run_dir),
        replicas=len(plans),
        devices=devices,
        port=cfg.nginx.port,
    )
    return emit


def build_supervisor(
    cfg: ServeConfig,
    plans: list[ReplicaPlan],
    run_dir: Path,
    emit: Callable[..., None],
    info: Mapping[str, Any],
    before_spawn: Callable[[ReplicaPlan], Awaitable[None]] | None = None,
    reload_source: Source | None = None,
    kept_tls: KeptPair | None = None,
) -> Supervisor:
    """The supervisor on the real adapters: subprocesses, HTTP probes, Nginx, the monotonic clock; its
    Nginx serves the front's pair from kept_tls's copies (None: from the configured files)."""
    from hunyuan_serve.auth import peer_headers
    from hunyuan_serve.edge.controller import NginxController
    from hunyuan_serve.run.probe import HttpProber
    from hunyuan_serve.run.procs import SubprocessRunner
    from hunyuan_serve.run.seams import RealClock
    from hunyuan_serve.supervise.supervisor import Supervisor

    return Supervisor(
        cfg,
        plans,
        runner=SubprocessRunner(before_spawn),
        # Replicas on TLS (replica.tls_cert) are probed over it, unverified: the hop stays on this host.
        prober=HttpProber(
            cfg.supervisor.probe_timeout_s,
            headers=peer_headers(cfg.auth),
            tls=False if cfg.replica.tls_cert else None,
        ),
        nginx=NginxController(cfg.nginx, run_dir / "nginx", headers=peer_headers(cfg.auth)),
        clock=RealClock(),
        emit=emit,
        run_dir=run_dir,
        web_root=web_root(),
        worker_user=worker_user(),
        base_env={**os.environ, PARENT_PID_ENV: str(os.getpid())},  # each replica watches `up`
        info=info,
        reload_source=reload_source,
        kept_tls=kept_tls,
    )


def _stack_info(cfg: ServeConfig, info: Mapping[str, Any], events: Path) -> dict[str, Any]:
    """What `status` shows of the stack: the pools' models and families, the events file (and where the
    peer secret is, so `status` can ask the replicas; never the secret itself; and whether they speak TLS)."""
    secret, tls = cfg.auth.peer_secret_file, bool(cfg.replica.tls_cert)
    return {**info, "events": str(events), "peer_secret_file": secret, "replica_tls": tls}


def cmd_up(args: argparse.Namespace) -> int:
    import asyncio

    from hunyuan_serve import gpu
    from hunyuan_serve.auth import open_listen_problem
    from hunyuan_serve.doctor import format_checks, preflight_pools
    from hunyuan_serve.edge.kept_tls import KEPT_TLS_DIR, KeptPair

    cfg = written = config_from_args(args)
    # Before the run dir and its lock: a refused pair leaves nothing half-started. It comes before the
    # listen check so that every fault of a pair is one refusal: exit 1, or 2 when a secret file others
    # may read is among them (SecretFileError, as for the keys file).
    problem = tls_refusal(cfg)
    if problem:
        print("hunyuan-serve: cannot start: " + problem, file=sys.stderr)
        return 1
    problem = open_listen_problem(cfg)
    if problem:  # a setting to change, like any other refused config: exit 2, before anything is written
        raise ConfigError(problem)
    run_dir = run_dir_of(cfg)
    make_run_dir(run_dir)
    lock = lock_run_dir(run_dir)
    leftovers, problem = clear_leftovers(cfg, run_dir)  # recorded once the events file is opened
    # Nginx serves copies of the pair checked above, replaced only by one a reload accepts: a renewal
    # refused stays off when Nginx reloads later for a replica that comes or goes (edge/kept_tls.py).
    kept = KeptPair(run_dir / KEPT_TLS_DIR)
    problem = problem or kept.install(cfg.nginx)
    if problem:
        print("hunyuan-serve: cannot start: " + problem, file=sys.stderr)
        return 1
    plans = plan_here(cfg, run_dir)
    problems = busy_ports(cfg, plans)
    if problems:
        print("hunyuan-serve: cannot start: " + "; ".join(problems), file=sys.stderr)
        return 1
    models = pool_models(cfg, plans)
    failed = [c for c in preflight_pools(cfg, plans, models) if c.failed]
    if failed:
        print("hunyuan-serve: cannot start (`hunyuan-serve doctor` shows every check):", file=sys.stderr)
        print(format_checks(failed), file=sys.stderr)
        return 1
    # Resolved once, so the replicas' configs and the stack's own /health name the same models.
    cfg, described = place_pools(cfg, plans, models)
    write_configs(cfg, plans, run_dir)
    info = pool_info(cfg, described)
    emit = open_events(cfg, plans, run_dir, info)
    for found in leftovers:  # each also on stderr
        emit(**found)
    sup = cfg.supervisor
    # A GPU replica's (re)start waits until the killed engine's memory is released (bounded).
    wait = gpu.release_waiter(
        cfg.engine.gpu_memory_utilization, sup.gpu_release_timeout_s, sup.gpu_release_poll_s, emit
    )
    info, source = _stack_info(cfg, info, emit.path), reload_source(args, written, run_dir, kept)
    supervisor = build_supervisor(cfg, plans, run_dir, emit, info, wait, source, kept)
    try:
        return asyncio.run(supervisor.run())
    finally:
        emit.close()
        lock.close()


def cmd_config(args: argparse.Namespace) -> int:
    sys.stdout.write(config_to_yaml(config_from_args(args)))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from hunyuan_serve.supervise.status import find_status, format_status

    cfg = build_config(load_config_file(args.config), {})
    asked = Path(args.run_dir) if args.run_dir else run_dir_of(cfg) if args.config else None
    run_dir, status, notes = find_status(asked, os.environ, cfg.supervisor.status_timeout_s)
    if status is None:
        print(f"hunyuan-serve: no `up` has run with run dir {run_dir} (pass --run-dir)", file=sys.stderr)
    elif args.json:
        print(json.dumps(status, indent=1))
    else:
        print(format_status(status))
    for note in notes:  # which stack this is, and the others: beside the JSON, never in it
        print(f"hunyuan-serve: {note}", file=sys.stderr if args.json or status is None else sys.stdout)
    if status is None:
        return 1
    return 0 if status["running"] else 3


def reload_source(
    args: argparse.Namespace, written: ServeConfig, run_dir: Path, kept: KeptPair | None = None
) -> Source:
    """Where a reload reads the config again: the file and flags `up` was started with, recorded in the
    run dir (for `reload --config`); file reads and model downloads run off the supervisor's loop. The
    front's pair it accepts is staged in `kept`, served once the reload applies the config."""
    import asyncio

    from hunyuan_serve.config import overrides_from_args
    from hunyuan_serve.run.ports import port_problem
    from hunyuan_serve.run.state import write_json_atomic
    from hunyuan_serve.supervise.reload import Source

    path = str(Path(args.config).resolve()) if getattr(args, "config", None) else None
    overrides = overrides_from_args(args)
    write_json_atomic(run_dir / SOURCE_FILE, {"config": path, "overrides": overrides})

    def checked() -> ServeConfig:
        cfg = build_config(load_config_file(path), overrides)
        # Nginx would take an expired pair, and fail `nginx -t` on a mismatch; a good one is copied beside
        # the copies it serves, until the reload applies the config (a refused reload leaves them alone).
        problem = tls_refusal(cfg) or (kept.stage(cfg.nginx) if kept is not None else None)
        if problem:
            raise ConfigError(problem)
        return cfg

    async def read() -> ServeConfig:
        return await asyncio.to_thread(checked)

    async def prepare(cfg: ServeConfig) -> Prepared:
        return await asyncio.to_thread(prepare_reload, cfg, run_dir)

    return Source(written, read, prepare, port_problem)

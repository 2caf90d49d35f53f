"""The `up`, `status`, `render` and `config` commands: the composition root of the supervisor."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hunyuan_serve.config import (
    ConfigError,
    ServeConfig,
    add_config_flags,
    build_config,
    config_from_args,
    config_to_yaml,
    default_run_dir,
    load_config_file,
)
from hunyuan_serve.config.replica import PARENT_PID_ENV
from hunyuan_serve.fleet.rundir import lock_run_dir, make_run_dir, run_dir_of, web_root, worker_user

if TYPE_CHECKING:
    from hunyuan_serve.fleet.events import JsonEvents
    from hunyuan_serve.fleet.plan import ReplicaPlan
    from hunyuan_serve.supervise.reload import Prepared, Source
    from hunyuan_serve.supervise.supervisor import Supervisor

ALL_SECTIONS = ("top", "engine", "replica", "supervisor", "nginx", "auth", "logs")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = subparsers.add_parser("up", help="Start replicas behind Nginx and supervise them (Ctrl-C stops).")
    serve_flags(up)
    up.set_defaults(func=cmd_up)

    status = subparsers.add_parser("status", help="Show the replicas of the running `up`.")
    status.add_argument("--run-dir", help="Run directory of that `up` (default: the per-user one).")
    status.add_argument("--config", metavar="FILE", help="Take the run directory from this config file.")
    status.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
    status.set_defaults(func=cmd_status)

    reload = subparsers.add_parser(
        "reload", help="Re-read the running `up`'s config and replace its replicas one at a time."
    )
    reload.add_argument("--run-dir", help="Run directory of that `up` (default: the per-user one).")
    reload.add_argument(
        "--config", metavar="FILE", help="The file `up` was started with (finds its run dir)."
    )
    reload.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="Seconds to wait for the outcome (supervisor.reload_wait_timeout_s).",
    )
    reload.set_defaults(func=cmd_reload)

    config = subparsers.add_parser("config", help="Print the effective config (file + flags) as YAML.")
    serve_flags(config)
    config.set_defaults(func=cmd_config)


def serve_flags(parser: argparse.ArgumentParser) -> None:
    add_config_flags(parser, ALL_SECTIONS)
    parser.add_argument("--port", dest="nginx.port", default=argparse.SUPPRESS, help="Same as --nginx-port.")


# -- effects `up` needs, kept here so the rest stays testable ------------------------------------


def busy_ports(cfg: ServeConfig, plans: Sequence[ReplicaPlan]) -> list[str]:
    """Why the public port or a replica's port cannot be bound now (empty: all free)."""
    from hunyuan_serve.fleet.ports import port_problem

    busy = [port_problem(cfg.nginx.listen, cfg.nginx.port)]
    busy += [port_problem(p.host, p.port) for p in plans]  # each pool's replica.host
    return [p for p in busy if p]


LEFTOVER_POLL_S = 0.05  # how often `up` looks whether a previous `up`'s processes are gone (a pause)


def clear_leftovers(cfg: ServeConfig, run_dir: Path) -> tuple[list[dict[str, Any]], str | None]:
    """What a previous `up` of this run dir left running when it was SIGKILL-ed (the run dir's lock is
    ours, so its `up` is gone): its Nginx is stopped; its replicas stop by themselves once they see
    `up` gone (replica.parent_check_s), so they are waited for as long as `up` would give each to
    stop. Returns the events to record, and why `up` cannot start (replicas still running) or None."""
    from hunyuan_serve.config import resolve_pools
    from hunyuan_serve.edge.controller import NginxController
    from hunyuan_serve.fleet import procs

    sup, found = cfg.supervisor, []
    nginx = NginxController(cfg.nginx, run_dir / "nginx")
    pid = nginx.stop_leftover(sup.drain_timeout_s, sup.kill_timeout_s, LEFTOVER_POLL_S)
    if pid is not None:
        found.append({"event": "leftover_nginx_stopped", "pid": pid})
    pids = procs.replicas_of(procs.processes(), run_dir)
    if not pids:
        return found, None
    replica = [pool.cfg.replica for pool in resolve_pools(cfg)]  # each pool's replicas its own
    bound_s = max(r.parent_check_s + r.graceful_shutdown_s for r in replica) + sup.kill_timeout_s
    left = procs.wait_gone(pids, bound_s, LEFTOVER_POLL_S)
    found.append({"event": "leftover_replicas_waited", "pids": pids, "left": left})
    if not left:
        return found, None
    return found, (
        f"replica processes a previous `up` left in {run_dir} still run after {bound_s:g}s: pid "
        + ", ".join(str(p) for p in left)
        + " (stop them, e.g. `kill PID`)"
    )


def write_configs(cfg: ServeConfig, plans: Sequence[ReplicaPlan], run_dir: Path) -> None:
    """The effective config of `up` and of each replica (its pool's, on its own port), where they will
    read them."""
    from hunyuan_serve.fleet.plan import pools_of, replica_config
    from hunyuan_serve.fleet.state import write_text_atomic

    pools = pools_of(cfg)
    for plan in plans:
        write_text_atomic(plan.config_path, config_to_yaml(replica_config(pools[plan.pool], plan.port)))
    write_text_atomic(run_dir / "config.yaml", config_to_yaml(cfg))


def open_events(
    cfg: ServeConfig, plans: Sequence[ReplicaPlan], run_dir: Path, info: Mapping[str, Any]
) -> JsonEvents:
    """A new events file for this `up`, its first event naming what it runs (each pool's model)."""
    from hunyuan_serve.fleet.events import JsonEvents

    path = run_dir / "events.jsonl"
    path.write_text("", encoding="utf-8")
    emit = JsonEvents(path)
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
) -> Supervisor:
    """The supervisor on the real adapters: subprocesses, HTTP probes, Nginx, the monotonic clock."""
    from hunyuan_serve.auth import peer_headers
    from hunyuan_serve.edge.controller import NginxController
    from hunyuan_serve.fleet.probe import HttpProber
    from hunyuan_serve.fleet.procs import SubprocessRunner
    from hunyuan_serve.fleet.seams import RealClock
    from hunyuan_serve.supervise.supervisor import Supervisor

    return Supervisor(
        cfg,
        plans,
        runner=SubprocessRunner(before_spawn),
        prober=HttpProber(cfg.supervisor.probe_timeout_s, headers=peer_headers(cfg.auth)),
        nginx=NginxController(cfg.nginx, run_dir / "nginx", headers=peer_headers(cfg.auth)),
        clock=RealClock(),
        emit=emit,
        run_dir=run_dir,
        web_root=web_root(),
        worker_user=worker_user(),
        base_env={**os.environ, PARENT_PID_ENV: str(os.getpid())},  # each replica watches `up`
        info=info,
        reload_source=reload_source,
    )


# -- commands -----------------------------------------------------------------------------------


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
    from hunyuan_serve.fleet.plan import pool_engine, with_pool_engine
    from hunyuan_serve.models import fetch_model

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


def _stack_info(cfg: ServeConfig, info: Mapping[str, Any], events: Path) -> dict[str, Any]:
    """What `status` shows of the stack: the pools' models and families, the events file (and where the
    peer secret is, so `status` can ask the replicas; never the secret itself)."""
    return {**info, "events": str(events), "peer_secret_file": cfg.auth.peer_secret_file}


def cmd_up(args: argparse.Namespace) -> int:
    import asyncio

    from hunyuan_serve import gpu
    from hunyuan_serve.auth import open_listen_problem
    from hunyuan_serve.doctor import format_checks, preflight_pools

    cfg = written = config_from_args(args)
    problem = open_listen_problem(cfg)
    if problem:  # a setting to change, like any other refused config: exit 2, before anything is written
        raise ConfigError(problem)
    run_dir = run_dir_of(cfg)
    make_run_dir(run_dir)
    lock = lock_run_dir(run_dir)
    leftovers, problem = clear_leftovers(cfg, run_dir)  # recorded once the events file is opened
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
    info, source = _stack_info(cfg, info, emit.path), reload_source(args, written, run_dir)
    supervisor = build_supervisor(cfg, plans, run_dir, emit, info, before_spawn=wait, reload_source=source)
    try:
        return asyncio.run(supervisor.run())
    finally:
        emit.close()
        lock.close()


def cmd_config(args: argparse.Namespace) -> int:
    sys.stdout.write(config_to_yaml(config_from_args(args)))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from hunyuan_serve.supervise.status import collect_status, format_status

    cfg = build_config(load_config_file(args.config), {})
    if args.run_dir:
        run_dir = Path(args.run_dir)
    elif args.config:
        run_dir = run_dir_of(cfg)
    else:
        run_dir = default_run_dir(os.environ)
    status = collect_status(run_dir, cfg.supervisor.status_timeout_s)
    if status is None:
        print(f"hunyuan-serve: no `up` has run with run dir {run_dir} (pass --run-dir)", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(status, indent=1))
    else:
        print(format_status(status))
    return 0 if status["running"] else 3


# -- rolling reload (SIGHUP to `up`, or `hunyuan-serve reload`) -----------------------------------

SOURCE_FILE = "reload-source.json"  # in the run dir: the config file and flags `up` was started with
RELOAD_POLL_S = 0.2  # how often `reload` reads the events file while it waits (a pause, not a deadline)


def plan_here(cfg: ServeConfig, run_dir: Path) -> list[ReplicaPlan]:
    """The replicas' plans on this machine's GPUs (as CUDA_VISIBLE_DEVICES limits them) or cores."""
    from hunyuan_serve import gpu
    from hunyuan_serve.fleet.plan import plan_replicas

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


def reload_source(args: argparse.Namespace, written: ServeConfig, run_dir: Path) -> Source:
    """Where a reload reads the config again: the file and flags `up` was started with, recorded in the
    run dir (for `reload --config`); file reads and model downloads run off the supervisor's loop."""
    import asyncio

    from hunyuan_serve.config import overrides_from_args
    from hunyuan_serve.fleet.ports import port_problem
    from hunyuan_serve.fleet.state import write_json_atomic
    from hunyuan_serve.supervise.reload import Source

    path = str(Path(args.config).resolve()) if getattr(args, "config", None) else None
    overrides = overrides_from_args(args)
    write_json_atomic(run_dir / SOURCE_FILE, {"config": path, "overrides": overrides})

    async def read() -> ServeConfig:
        return await asyncio.to_thread(lambda: build_config(load_config_file(path), overrides))

    async def prepare(cfg: ServeConfig) -> Prepared:
        return await asyncio.to_thread(prepare_reload, cfg, run_dir)

    return Source(written, read, prepare, port_problem)


def _reload_target(args: argparse.Namespace) -> tuple[Path, float]:
    """The run dir of the `up` to reload, and how long to wait for the outcome."""
    if args.config:
        cfg = build_config(load_config_file(args.config), {})
        run_dir = Path(args.run_dir) if args.run_dir else run_dir_of(cfg)
        recorded = _recorded_config(run_dir)
        if recorded is not None and recorded != str(Path(args.config).resolve()):
            raise ConfigError(f"the `up` in {run_dir} was started with {recorded}: that is the file it reads")
    else:
        run_dir = Path(args.run_dir) if args.run_dir else default_run_dir(os.environ)
        try:  # the running `up`'s own effective config
            cfg = build_config(load_config_file(run_dir / "config.yaml"), {})
        except ConfigError:
            cfg = build_config({}, {})
    return run_dir, args.timeout or cfg.supervisor.reload_wait_timeout_s


def _recorded_config(run_dir: Path) -> str | None:
    try:
        data = json.loads((run_dir / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("config") if isinstance(data, dict) else None


def cmd_reload(args: argparse.Namespace) -> int:
    import signal

    from hunyuan_serve.fleet.events import read_events
    from hunyuan_serve.fleet.procs import pid_alive
    from hunyuan_serve.fleet.state import EVENTS_FILE, read_state

    run_dir, timeout_s = _reload_target(args)
    state = read_state(run_dir)
    pid = int(state.get("pid", 0)) if state else 0
    if not state or not state.get("running") or not pid_alive(pid):
        print(f"hunyuan-serve: no `up` is running with run dir {run_dir} (pass --run-dir)", file=sys.stderr)
        return 1
    events = Path(state.get("events") or run_dir / EVENTS_FILE)
    mark = len(read_events(events))
    os.kill(pid, signal.SIGHUP)  # `up` reads its config again; the events say what became of it
    return _await_reload(events, mark, pid, timeout_s)


def _await_reload(
    events_path: Path,
    mark: int,
    pid: int,
    timeout_s: float,
    now: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Follow the events until reload's outcome; now/sleep are the clock (a fake one in tests)."""
    from hunyuan_serve.fleet.events import read_events
    from hunyuan_serve.fleet.procs import pid_alive
    from hunyuan_serve.supervise.reload import outcome, reload_id

    deadline = now() + timeout_s
    rid: int | None = None
    while now() < deadline:
        events = read_events(events_path)[mark:]
        rid = rid or reload_id(events)
        ended = outcome(events, rid) if rid is not None else None
        if ended is not None:
            print(ended[1], file=sys.stdout if ended[0] == 0 else sys.stderr)
            return ended[0]
        if not pid_alive(pid):
            print(f"hunyuan-serve: `up` (pid {pid}) exited before the reload ended", file=sys.stderr)
            return 1
        sleep(RELOAD_POLL_S)
    print(
        f"hunyuan-serve: reload {rid or '?'} has not ended within {timeout_s:g}s; it goes on "
        "(`hunyuan-serve status` shows it)",
        file=sys.stderr,
    )
    return 1

"""`up`'s checks before it writes anything: the TLS pairs, what a previous `up` left running, busy ports."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hunyuan_serve.config import ServeConfig

if TYPE_CHECKING:
    from hunyuan_serve.run.plan import ReplicaPlan


def busy_ports(cfg: ServeConfig, plans: Sequence[ReplicaPlan]) -> list[str]:
    """Why the public port or a replica's port cannot be bound now (empty: all free)."""
    from hunyuan_serve.run.ports import port_problem

    busy = [port_problem(cfg.nginx.listen, cfg.nginx.port)]
    if cfg.nginx.tls_cert:  # the TLS listener's port too
        busy.append(port_problem(cfg.nginx.listen, cfg.nginx.tls_port))
    busy += [port_problem(p.host, p.port) for p in plans]  # each pool's replica.host
    return [p for p in busy if p]


def tls_refusal(cfg: ServeConfig) -> str | None:
    """Why the edge's pair (nginx.tls_*) or the replicas' (replica.tls_*) cannot be served, every reason
    (None: TLS off, or good pairs). `up` asks it before it makes its run dir; a reload asks it of the
    files as they are now: a renewal installed at the same paths. A secret file others may read (a
    pair's key, the keys file...) raises SecretFileError instead, naming the pairs' other faults too:
    exit 2 like every refused secret file, and still one refusal with every reason."""
    from hunyuan_serve.auth import refuse_exposed
    from hunyuan_serve.edge.tls import check_pair, check_replica_pair

    reports = (check_pair(cfg.nginx), check_replica_pair(cfg.replica.tls_cert, cfg.replica.tls_key))
    problems = [p for report in reports if report is not None for p in report.problems]
    refuse_exposed(cfg, also=problems)
    return "; ".join(problems) if problems else None


LEFTOVER_POLL_S = 0.05  # how often `up` looks whether a previous `up`'s processes are gone (a pause)


def clear_leftovers(cfg: ServeConfig, run_dir: Path) -> tuple[list[dict[str, Any]], str | None]:
    """What a previous `up` of this run dir left running when it was SIGKILL-ed (the run dir's lock is
    ours, so its `up` is gone): its Nginx is stopped; its replicas stop by themselves once they see
    `up` gone (replica.parent_check_s), so they are waited for as long as `up` would give each to
    stop. Returns the events to record, and why `up` cannot start (replicas still running) or None."""
    from hunyuan_serve.config import resolve_pools
    from hunyuan_serve.edge.controller import NginxController
    from hunyuan_serve.run import procs

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

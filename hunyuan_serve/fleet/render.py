"""Renders the Nginx config and the systemd unit from the packaged Jinja templates (strictly)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from hunyuan_serve.auth import DIALECTS, EDGE_ERRORS, NATIVE, peer_secret
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.fleet.routing import Routing

NGINX_TEMPLATE = "nginx/nginx.conf.j2"
SYSTEMD_TEMPLATE = "systemd/hunyuan-serve.service.j2"
# Every dialect's path prefixes (hunyuan_serve.auth.DIALECTS); /metrics only with nginx.expose_metrics.
PROXIED_PATHS = tuple(p for d in DIALECTS for p in d.prefixes if p != "/metrics")


def nginx_time(seconds: float) -> str:
    """Seconds as an Nginx time: whole seconds as '5s', anything finer in milliseconds."""
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{max(1, round(seconds * 1000))}ms"


def nginx_rate(rps: float) -> str:
    """Requests per second as an Nginx rate; Nginx takes only whole r/s or r/m."""
    if rps >= 1 and float(rps).is_integer():
        return f"{int(rps)}r/s"
    return f"{max(1, math.ceil(rps * 60))}r/m"


def nginx_json(value: Any) -> str:
    """A JSON body as one single-quoted Nginx string."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # Nginx would read a "$" as a variable and has no escape for it; JSON's \u0024 is the same text.
    text = text.replace("$", "\\u0024")
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


_SYSTEMD_PLAIN = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def systemd_quote(value: object) -> str:
    """One word of a unit file line, quoted so systemd neither splits nor expands it."""
    text = str(value).replace("%", "%%")
    if _SYSTEMD_PLAIN.match(text):
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")
    return f'"{escaped}"'


def environment() -> jinja2.Environment:
    """The packaged templates; an undefined variable is an error, never an empty string."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("hunyuan_serve", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=False,  # loaded once: `up` never re-reads a template file changed under it
    )
    env.filters.update(
        nginx_time=nginx_time, nginx_rate=nginx_rate, nginx_json=nginx_json, systemd_quote=systemd_quote
    )
    return env


def edge_max_conns(cfg: ServeConfig) -> int:
    """Nginx's cap per replica (0: none). By default what the replica's engine batches at once (past
    that a request only waits inside the replica, where the edge can no longer refuse it): max_num_seqs,
    on CPU at most nginx.cpu_max_conns; never more than the replica itself admits (max_in_flight)."""
    if cfg.nginx.max_conns is not None:
        return cfg.nginx.max_conns
    batch = cfg.engine.max_num_seqs
    if cfg.engine.device == "cpu":
        batch = min(batch, cfg.nginx.cpu_max_conns)
    return min(batch, cfg.replica.max_in_flight)


@dataclass(frozen=True)
class GatewayFront:
    """What a gateway's Nginx says beside its routing: the model its hosts serve, each host's state."""

    model: str
    family: str | None
    hosts: Mapping[str, Any]


def _identity(cfg: ServeConfig, front: GatewayFront | None) -> tuple[str, str | None]:
    """The model (as the replicas report it: the client keys its cache by it) and its prompt family."""
    if front is not None:
        return front.model, front.family
    family = None if cfg.engine.prompt_family == "auto" else cfg.engine.prompt_family
    return cfg.engine.served_model_name or cfg.engine.model or "", family


def _bodies(
    cfg: ServeConfig, routing: Routing, generation: int, front: GatewayFront | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """/health's body, and a host's replica listing (/_hs/replicas; none on a gateway) from the routing."""
    model, family = _identity(cfg, front)
    status = "ready" if routing.ready else "unavailable"
    health: dict[str, Any] = {"status": status, "model": model, "family": family, "ready": routing.ready}
    health.update(replicas=len(routing.servers), config=generation)
    if front is not None:
        return {**health, "hosts": dict(front.hosts)}, None
    replicas = [{"name": s.name, "addr": s.addr, "ready": not s.down} for s in routing.servers]
    return health, {"model": model, "family": family, "config": generation, "replicas": replicas}


def render_nginx(
    cfg: ServeConfig,
    routing: Routing,
    *,
    prefix: Path,
    web_root: Path,
    worker_user: str | None,
    generation: int = 0,
    env: jinja2.Environment | None = None,
    front: GatewayFront | None = None,
) -> str:
    """The whole nginx.conf for this routing (replicas not routable are listed as `down`): a host's, or
    with `front` a gateway's (its upstream spans every host's replicas)."""
    proxied = PROXIED_PATHS + (("/metrics",) if cfg.nginx.expose_metrics else ())
    template = (env or environment()).get_template(NGINX_TEMPLATE)
    health, listing = _bodies(cfg, routing, generation, front)
    secret = peer_secret(cfg.auth)  # sent to every replica; a host's Nginx also asks its callers for it
    return template.render(
        nginx=cfg.nginx,
        routing=routing,
        prefix=str(prefix),
        web_root=str(web_root),
        worker_user=worker_user,
        proxied=proxied,
        auth=cfg.auth,
        edge_errors=edge_errors(cfg),
        dialects=dialect_patterns(),
        fallback_dialect=NATIVE.name,
        generation=generation,
        max_conns=edge_max_conns(cfg),
        health=health,
        listing=listing,
        peer_secret=secret,
        peer_required=secret is not None and front is None,
    )


def edge_errors(cfg: ServeConfig) -> dict[str, dict[str, Any]]:
    """The errors Nginx makes itself: per code its status and, per dialect, its body as an Nginx string."""
    table: dict[str, dict[str, Any]] = {}
    for code, (status, message) in EDGE_ERRORS.items():
        text = message.format(limit=cfg.nginx.client_max_body_size)
        bodies = {d.name: nginx_json(d.error(code, text)) for d in DIALECTS}
        table[code] = {"status": status, "bodies": bodies}
    return table


def dialect_patterns() -> list[tuple[str, str]]:
    """(Nginx regex on $uri, dialect name) for every prefix but ours, which is the map's default."""
    rows = [(p, d.name) for d in DIALECTS if d is not NATIVE for p in d.prefixes]
    return [("~^" + re.escape(p.rstrip("/")) + ("/" if p.endswith("/") else ""), name) for p, name in rows]


def stop_timeout_s(cfg: ServeConfig) -> int:
    """How long systemd waits after SIGTERM: drain, then the replicas' stop, with margin."""
    sup = cfg.supervisor
    return math.ceil(sup.drain_timeout_s + 2 * sup.kill_timeout_s + cfg.nginx.reload_timeout_s + 15)


def render_systemd(
    cfg: ServeConfig,
    *,
    argv: Sequence[str],
    run_dir: Path,
    working_dir: Path,
    user: str | None,
    replicas: int,
    config_path: str,
    env: jinja2.Environment | None = None,
) -> str:
    """The unit that runs `up` under systemd, reading the config file at config_path."""
    template = (env or environment()).get_template(SYSTEMD_TEMPLATE)
    return template.render(
        argv=list(argv),
        exe=argv[0],
        run_dir=str(run_dir),
        working_dir=str(working_dir),
        user=user,
        replicas=replicas,
        nginx=cfg.nginx,
        supervisor=cfg.supervisor,
        start_limit_interval_s=math.ceil(cfg.supervisor.crash_loop_window_s),
        stop_timeout_s=stop_timeout_s(cfg),
        config_path=config_path,
    )

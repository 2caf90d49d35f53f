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

from hunyuan_serve.auth import DIALECTS, EDGE_ERRORS, INTERNAL_ONLY, NATIVE, POOL_ERRORS, peer_secret
from hunyuan_serve.config import ConfigError, Pool, ServeConfig, default_pool, resolve_pools
from hunyuan_serve.fleet.front import (
    SINGLE_UPSTREAM,
    Upstream,
    edge_pools,
    family_of,
    health_status,
    models_list,
    pool_locations,
    pool_upstream,
    pools_health,
    route_script,
    routes_table,
    served_name,
)
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
    return served_name(cfg), family_of(cfg)


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


@dataclass(frozen=True)
class Layout:
    """What differs between one pool and several: the upstreams, /health, and (several) the routing."""

    upstreams: tuple[Upstream, ...]
    health: dict[str, Any]
    health_ok: bool
    listing: dict[str, Any] | None
    pooled: dict[str, Any] | None  # None with one pool: no njs, the config as it always was


def _single(cfg: ServeConfig, routing: Routing, generation: int, front: GatewayFront | None) -> Layout:
    """One pool (cfg: its effective config) or a gateway: one upstream, the config as it always was."""
    health, listing = _bodies(cfg, routing, generation, front)
    upstream = Upstream(SINGLE_UPSTREAM, routing.servers, edge_max_conns(cfg))
    return Layout((upstream,), health, bool(routing.ready), listing, None)


def _several(
    cfg: ServeConfig, routing: Routing, generation: int, pools: Sequence[Pool], script: Path
) -> Layout:
    """Several pools: one upstream each, routing by model in route.js, /health with each pool's state."""
    if parse_size(cfg.nginx.client_max_body_size) == 0:
        raise ConfigError(
            "nginx.client_max_body_size: 0 (no limit) cannot route by model: njs reads the whole body "
            "in memory, so it needs a bound"
        )
    edge = edge_pools(pools, routing, {p.name: edge_max_conns(p.cfg) for p in pools})
    first = next(p for p in edge if p.name == default_pool(cfg))
    status, ok = health_status(edge, first.name)
    health: dict[str, Any] = {"status": status, "model": first.served, "family": first.family}
    health.update(ready=routing.ready, replicas=len(routing.servers), config=generation)
    health["pools"] = pools_health(edge)
    replicas = [
        {"name": s.name, "addr": s.addr, "ready": not s.down, "pool": s.pool} for s in routing.servers
    ]
    listing: dict[str, Any] = {
        "model": first.served,
        "family": first.family,
        "config": generation,
        "replicas": replicas,
    }
    listing["pools"] = {p.name: p.served for p in edge}
    pooled = {
        "pools": edge,
        "js_module": cfg.nginx.js_module,
        "script": str(script),
        "routes": routes_table(edge, cfg),
        "models": models_list(edge),
        "keyed": cfg.auth.keys_file is not None,
        "default_upstream": pool_upstream(first.name),
        "internal_only": nginx_json(NATIVE.error("internal_only", INTERNAL_ONLY)),
    }
    return Layout(tuple(p.upstream for p in edge), health, ok, listing, pooled)


def parse_size(text: str) -> int:
    """An Nginx size (8m, 512k, 1g, 100) in bytes."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    value = text.strip().lower()
    if value and value[-1] in units:
        return int(value[:-1]) * units[value[-1]]
    return int(value)


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
    pools: Sequence[Pool] | None = None,
    script: Path | None = None,
) -> str:
    """The whole nginx.conf for this routing (replicas not routable are listed as `down`): a host's, or
    with `front` a gateway's (its upstream spans every host's replicas). pools: each pool as its replicas
    run it (default: resolve_pools(cfg)); with several, one upstream each and routing by model (njs,
    reading `script`, default the packaged route.js)."""
    proxied = PROXIED_PATHS + (("/metrics",) if cfg.nginx.expose_metrics else ())
    template = (env or environment()).get_template(NGINX_TEMPLATE)
    pools = resolve_pools(cfg) if pools is None else pools
    if len(pools) > 1 and front is None:
        layout = _several(cfg, routing, generation, pools, script or route_script())
    else:  # a `pools` section of one pool renders as that pool's settings would at the top level
        layout = _single(cfg if front else pools[0].cfg, routing, generation, front)
    secret = peer_secret(cfg.auth)  # sent to every replica; a host's Nginx also asks its callers for it
    return template.render(
        nginx=cfg.nginx,
        routing=routing,
        prefix=str(prefix),
        web_root=str(web_root),
        worker_user=worker_user,
        proxied=proxied,
        auth=cfg.auth,
        edge_errors=edge_errors(cfg, pooled=layout.pooled is not None),
        dialects=dialect_patterns(),
        fallback_dialect=NATIVE.name,
        generation=generation,
        upstreams=layout.upstreams,
        health=layout.health,
        health_ok=layout.health_ok,
        listing=layout.listing,
        pooled=layout.pooled,
        locations=pool_locations(proxied, cfg) if layout.pooled else [],
        peer_secret=secret,
        peer_required=secret is not None and front is None,
    )


def edge_errors(cfg: ServeConfig, *, pooled: bool = False) -> dict[str, dict[str, Any]]:
    """The errors Nginx makes itself: per code its status and, per dialect, its body as an Nginx string
    (with several pools also model_not_found, whose {model} route.js fills in)."""
    table: dict[str, dict[str, Any]] = {}
    errors = {**EDGE_ERRORS, **(POOL_ERRORS if pooled else {})}
    for code, (status, message) in errors.items():
        text = message.format(limit=cfg.nginx.client_max_body_size, model="{model}")
        bodies = {d.name: nginx_json(d.error(code, text)) for d in DIALECTS}
        table[code] = {"status": status, "bodies": bodies, "page": code in EDGE_ERRORS}
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

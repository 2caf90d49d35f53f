"""Renders the whole nginx.conf from the packaged template: a host's, or a gateway's in front of hosts."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

from hunyuan_serve.auth import peer_secret
from hunyuan_serve.config import NginxConfig, Pool, ServeConfig, resolve_pools
from hunyuan_serve.edge.capacity import worker_connections
from hunyuan_serve.edge.dialects import (
    BULK_ERRORS,
    DIALECTS,
    EDGE_ERRORS,
    KEY_SCHEMES,
    NATIVE,
    POOL_ERRORS,
    REFERENCE_PAGE,
    REFERENCE_SCHEMA,
    REQUEST_HEADERS,
    ROUTE_METHODS,
    ROUTING_ERRORS,
    allow_header,
    path_regex,
)
from hunyuan_serve.edge.filters import nginx_json, nginx_rate, nginx_time
from hunyuan_serve.edge.hold import hold_view
from hunyuan_serve.edge.layout import (
    GatewayFront,
    Layout,
    gateway_pools,
    host_pools,
    own_address,
    pool_locations,
    several_layout,
    single_layout,
)
from hunyuan_serve.edge.routing import Routing
from hunyuan_serve.edge.upstream_tls import UpstreamTls, host_upstream_tls, replicas_speak_tls
from hunyuan_serve.run.plan import loopback_for
from hunyuan_serve.templating import strict_environment

NGINX_TEMPLATE = "nginx.conf.j2"
# Every dialect's path prefixes (edge.dialects.DIALECTS); /metrics only with nginx.expose_metrics.
# and the API reference's document and page, which the replicas serve.
_PREFIXES = tuple(p for d in DIALECTS for p in d.prefixes if p != "/metrics")
PROXIED_PATHS = (*_PREFIXES, REFERENCE_SCHEMA, REFERENCE_PAGE)


def environment() -> jinja2.Environment:
    """The packaged Nginx templates, with the filters that write Nginx's values."""
    return strict_environment(
        "hunyuan_serve.edge", nginx_time=nginx_time, nginx_rate=nginx_rate, nginx_json=nginx_json
    )


def _layout(
    cfg: ServeConfig,
    routing: Routing,
    generation: int,
    front: GatewayFront | None,
    pools: Sequence[Pool],
    script: Path | None,
) -> Layout:
    """One pool or several, on a host or a gateway."""
    if front is not None and len(front.pools) > 1:
        return several_layout(cfg, routing, generation, gateway_pools(cfg, front, script))
    if len(pools) > 1 and front is None:
        return several_layout(cfg, routing, generation, host_pools(cfg, pools, script))
    # a `pools` section of one pool renders as that pool's settings would at the top level
    return single_layout(cfg if front else pools[0].cfg, routing, generation, front)


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
    upstream_tls: UpstreamTls | None = None,
    ready_file: Path | None = None,
) -> str:
    """The whole nginx.conf for this routing (replicas not routable are listed as `down`): a host's, or
    with `front` a gateway's (its upstream spans every host's replicas). pools: each pool as its replicas
    run it (default: resolve_pools(cfg)); with several, one upstream each and routing by model (njs,
    reading `script`, default the packaged route.js; hold.js beside it). upstream_tls: how a gateway reaches
    its hosts' replicas over TLS (a host's own follow from replica.tls_cert). ready_file: edge/hold.py."""
    proxied = PROXIED_PATHS + (("/metrics",) if cfg.nginx.expose_metrics else ())
    template = (env or environment()).get_template(NGINX_TEMPLATE)
    layout = _layout(cfg, routing, generation, front, resolve_pools(cfg) if pools is None else pools, script)
    secret = peer_secret(cfg.auth)  # sent to every replica; a host's Nginx also asks its callers for it
    # Each upstream's bulk cap, by name (its zone, its limit_conn): a full pool refuses bulk first.
    bulk = {u.name: u.bulk_conns for u in layout.upstreams if u.bulk_conns}
    return template.render(
        nginx=cfg.nginx,
        worker_connections=worker_connections(cfg.nginx.worker_connections, layout.upstreams),
        routing=routing,
        prefix=str(prefix),
        web_root=str(web_root),
        worker_user=worker_user,
        proxied=proxied,
        auth=cfg.auth,
        edge_errors=edge_errors(cfg, pooled=layout.pooled is not None, bulk=bool(bulk)),
        dialects=dialect_patterns(),
        fallback_dialect=NATIVE.name,
        generation=generation,
        upstreams=layout.upstreams,
        health=layout.health,
        health_ok=layout.health_ok,
        # A host whose replicas speak TLS says so: a gateway with an https url for it requires it.
        listing={**layout.listing, "tls": True}
        if layout.listing is not None and replicas_speak_tls(cfg)
        else layout.listing,
        pooled=layout.pooled,
        locations=pool_locations(proxied, *layout.pooled["names"]) if layout.pooled else [],
        peer_secret=secret,
        peer_required=secret is not None and front is None,
        bulk_caps=bulk,
        bulk_texts={u.name: u.bulk_texts for u in layout.upstreams if u.bulk_texts},
        cors_allow_headers=REQUEST_HEADERS,
        key_schemes=KEY_SCHEMES,
        allow=allow_patterns(),
        refused_methods=refused_patterns(),
        tls=tls_view(cfg.nginx),
        upstream_tls=upstream_tls if front is not None else host_upstream_tls(cfg),
        hold=hold_view(cfg, routing, ready_file, _hold_pools(layout), script),
    )


def _hold_pools(layout: Layout) -> dict[str, str]:
    """Each upstream's pool as hold.js names it: with one pool the empty name, with several the pool's."""
    if layout.pooled is None:
        return {u.name: "" for u in layout.upstreams}
    return {p.upstream.name: p.name for p in layout.pooled["pools"]}


def tls_view(nginx: NginxConfig) -> dict[str, Any] | None:
    """What the template writes of TLS at the edge (None: off): where the plain port listens, the
    redirect's port, the HSTS value, and this host's own address (its processes keep the plain port)."""
    if not nginx.tls_cert:
        return None
    plain = nginx.listen
    if nginx.plain_http == "off" and plain in ("0.0.0.0", "*", "", "::", "[::]"):
        plain = loopback_for(plain)  # a wildcard would open the plain port to every network
    return {
        "plain": nginx.plain_http,
        "plain_listen": plain,
        "port_suffix": "" if nginx.tls_port == 443 else f":{nginx.tls_port}",
        "hsts": f"max-age={nginx.hsts_max_age_s}" if nginx.hsts_max_age_s else None,
        "own_address": own_address(nginx.listen),
    }


def edge_errors(cfg: ServeConfig, *, pooled: bool = False, bulk: bool = False) -> dict[str, dict[str, Any]]:
    """The errors Nginx makes itself: per code its status and, per dialect, its body as an Nginx string
    (with several pools also model_not_found, whose {model} route.js fills in; with a bulk cap the
    503 overloaded of a bulk request past it)."""
    table: dict[str, dict[str, Any]] = {}
    errors = {**EDGE_ERRORS, **ROUTING_ERRORS, **(POOL_ERRORS if pooled else {})}
    errors.update(BULK_ERRORS if bulk else {})
    for code, (status, message) in errors.items():
        text = message.format(limit=cfg.nginx.client_max_body_size, model="{model}")
        bodies = {d.name: nginx_json(d.error(code, text, status)) for d in DIALECTS}
        table[code] = {"status": status, "bodies": bodies, "page": code not in POOL_ERRORS}
    return table


def allow_patterns() -> list[tuple[str, str]]:
    """(Nginx regex on $uri, Allow) for each path of edge.dialects.ROUTE_METHODS, for Nginx's own 405."""
    return [("~^" + path_regex(path) + "$", allow_header(m)) for path, m in ROUTE_METHODS.items()]


def refused_patterns() -> list[str]:
    """Nginx regexes on "$request_method:$uri" of each known path with a method it does not take (a
    CORS preflight's OPTIONS is always taken)."""
    rows = []
    for path, methods in ROUTE_METHODS.items():
        taken = "|".join([*allow_header(methods).split(", "), "OPTIONS"])
        rows.append(f"~^(?!(?:{taken}):)[^:]*:{path_regex(path)}$")
    return rows


def dialect_patterns() -> list[tuple[str, str]]:
    """(Nginx regex on $uri, dialect name) for every prefix but ours, which is the map's default."""
    rows = [(p, d.name) for d in DIALECTS if d is not NATIVE for p in d.prefixes]
    return [("~^" + re.escape(p.rstrip("/")) + ("/" if p.endswith("/") else ""), name) for p, name in rows]

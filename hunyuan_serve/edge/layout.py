"""The pools as Nginx sees them: upstreams, served names, the njs routing table and /health's bodies."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from hunyuan_serve import models
from hunyuan_serve.config import ConfigError, Pool, ServeConfig, default_pool
from hunyuan_serve.edge.capacity import edge_bulk_conns, edge_bulk_texts, edge_max_conns, replica_holds
from hunyuan_serve.edge.dialects import DIALECTS, INTERNAL_ONLY, NATIVE
from hunyuan_serve.edge.filters import nginx_json, parse_size
from hunyuan_serve.edge.routing import Routing, UpstreamServer

SINGLE_UPSTREAM = "hs_replicas"  # the one upstream of a single pool, named as it always was
# The njs script that routes by the body's model, packaged beside the template (pyproject package-data).
ROUTE_SCRIPT = "route.js"
# Bodies whose `model` picks the pool: each API's declared `routed` (OpenAI's two completions, /translate).
ROUTED_PATHS = tuple(path for dialect in DIALECTS for path in dialect.routed)


@dataclass(frozen=True)
class Upstream:
    """One Nginx upstream block: a pool's replicas and the cap on each (edge_max_conns of its config);
    holds: the requests each replica may hold open, capped or not (replica_holds);
    bulk_conns: the bulk requests Nginx lets into the pool at once (0: no cap, edge_bulk_conns);
    bulk_texts: the texts its ready engines batch for bulk work (edge_bulk_texts; 0: none ready)."""

    name: str
    servers: tuple[UpstreamServer, ...]
    max_conns: int
    holds: int  # no default: a zero here would leave Nginx's worker_connections short, silently
    bulk_conns: int = 0
    bulk_texts: int = 0


@dataclass(frozen=True)
class EdgePool:
    """One pool at the edge: its upstream and the model name its replicas answer with."""

    name: str
    served: str
    family: str | None
    upstream: Upstream

    @property
    def ready(self) -> int:
        return sum(not s.down for s in self.upstream.servers)


def pool_model_name(cfg: ServeConfig) -> str:
    """The model a pool's replicas report (in /v1/models and every answer's `model`), and so the one
    name the edge routes to them: engine.served_model_name, else the name models.served_name gives the
    model as given (a hub id, or a local checkpoint's directory name), as the replicas do. One name, no
    alias: the replica checks `model` against exactly this name, so a name the edge accepted beside it
    would be the replica's 404."""
    return models.served_name(cfg.engine.model or "", cfg.engine.served_model_name)


def family_of(cfg: ServeConfig) -> str | None:
    return None if cfg.engine.prompt_family == "auto" else cfg.engine.prompt_family


def pool_upstream(name: str) -> str:
    return f"hs_pool_{name}"


def model_pool(model: str) -> str:
    """The pool a gateway routes a model to (hosts list models, not the gateway's pools): a valid pool
    name, readable, and unique by a hash of the whole name."""
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower().rsplit("/", 1)[-1]).strip("-")[:19]
    digest = hashlib.sha256(model.encode()).hexdigest()[:8]
    return f"m-{slug}-{digest}" if slug else f"m-{digest}"


def edge_pools(
    pools: Sequence[Pool], routing: Routing, max_conns: Mapping[str, int], bulk_cap: bool = False
) -> tuple[EdgePool, ...]:
    """Each pool with its servers from the routing; a server of a pool the config lacks is an error.
    bulk_cap: each pool's bulk requests capped (edge_bulk_conns, by the pool's own reserve)."""
    grouped = routing.pools()
    unknown = sorted(set(grouped) - {p.name for p in pools})
    if unknown:
        raise ConfigError(f"the routing names pools the config lacks: {', '.join(unknown)}")
    seen: dict[str, str] = {}
    out = []
    for pool in pools:
        served = pool_model_name(pool.cfg)
        if served and served in seen:
            raise ConfigError(
                f"pools {seen[served]} and {pool.name} both serve {served!r}: set engine.served_model_name "
                "in one of them, so a request's model names one pool"
            )
        seen[served] = pool.name
        servers = grouped.get(pool.name, ())
        bulk = edge_bulk_conns(pool.cfg, servers, max_conns[pool.name]) if bulk_cap else 0
        texts = edge_bulk_texts(pool.cfg, servers)
        holds = replica_holds(pool.cfg, max_conns[pool.name])
        upstream = Upstream(pool_upstream(pool.name), servers, max_conns[pool.name], holds, bulk, texts)
        out.append(EdgePool(pool.name, served, family_of(pool.cfg), upstream))
    return tuple(out)


def health_status(pools: Sequence[EdgePool], default: str) -> tuple[str, bool]:
    """(status, whether /health answers 200). ready: every pool has a ready replica; degraded: the
    default pool has one but another pool none (its model's requests get the 503, the rest are served,
    so a load balancer keeps sending); unavailable (503): the default pool has none, so a request that
    names no model, and every LibreTranslate/DeepL/Immersive one by default, cannot be served."""
    by_name = {p.name: p for p in pools}
    if not by_name[default].ready:
        return "unavailable", False
    return ("ready" if all(p.ready for p in pools) else "degraded"), True


def pools_health(pools: Sequence[EdgePool]) -> dict[str, dict[str, Any]]:
    return {
        p.name: {"model": p.served, "family": p.family, "ready": p.ready, "replicas": len(p.upstream.servers)}
        for p in pools
    }


def models_list(pools: Sequence[EdgePool]) -> dict[str, Any]:
    """GET /v1/models with several pools, in OpenAI's list shape: every pool's served name."""
    cards = [
        {"id": p.served, "object": "model", "created": 0, "owned_by": "hunyuan-serve"}
        for p in pools
        if p.served
    ]
    return {"object": "list", "data": cards}


def routes_table(pools: Sequence[EdgePool], default: str, retry_after_s: int) -> dict[str, Any]:
    """What route.js reads ($hs_routes): the named location of each served name and of no model (the
    default pool's), the /v1/models list it answers once the key is checked, and the Retry-After of a
    503 there."""
    return {
        "default": "@" + pool_upstream(default),
        "models": {p.served: "@" + p.upstream.name for p in pools if p.served},
        "list": models_list(pools),
        "retry_after": retry_after_s,
    }


def pool_locations(proxied: Sequence[str], default_name: str, dialect_name: str) -> list[dict[str, str]]:
    """The public locations with several pools: the routed paths run route.js; the other paths of the
    native and OpenAI APIs go to the default pool, the other dialects to the dialect pool."""
    # An API with routes that name a model (its `routed`): its other paths go to the default pool too.
    model_api = {p: bool(d.routed) for d in DIALECTS for p in d.prefixes}
    default, dialect = pool_upstream(default_name), pool_upstream(dialect_name)
    rows: list[dict[str, str]] = []
    for path in (*proxied, *(p for p in ROUTED_PATHS if p not in proxied)):
        if path in ROUTED_PATHS:
            rows.append({"path": path, "js": "hs.route"})
        else:
            rows.append({"path": path, "upstream": default if model_api.get(path, True) else dialect})
    return rows


def pool_names(cfg: ServeConfig) -> tuple[str, str]:
    """(default pool, dialect pool) of a host's config: default_pool, and nginx.dialect_pool or that."""
    default = default_pool(cfg)
    return default, cfg.nginx.dialect_pool or default


def route_script() -> Path:
    """The packaged route.js, read by this machine's Nginx (a pod mounts its own copy: k8s)."""
    return Path(str(resources.files("hunyuan_serve.edge") / "templates" / ROUTE_SCRIPT))


@dataclass(frozen=True)
class GatewayFront:
    """What a gateway's Nginx says beside its routing: the model its hosts serve, each host's state."""

    model: str
    family: str | None
    hosts: Mapping[str, Any]
    # Pool key -> model, for each model routed (model_pool); several: routing by model.
    pools: Mapping[str, str] = field(default_factory=dict)


def _identity(cfg: ServeConfig, front: GatewayFront | None) -> tuple[str, str | None]:
    """The model (as the replicas report it: the client keys its cache by it) and its prompt family."""
    if front is not None:
        return front.model, front.family
    return pool_model_name(cfg), family_of(cfg)


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


def single_layout(cfg: ServeConfig, routing: Routing, generation: int, front: GatewayFront | None) -> Layout:
    """One pool (cfg: its effective config) or a gateway: one upstream, the config as it always was."""
    health, listing = _bodies(cfg, routing, generation, front)
    conns = edge_max_conns(cfg)
    bulk, texts = edge_bulk_conns(cfg, routing.servers, conns), edge_bulk_texts(cfg, routing.servers)
    upstream = Upstream(SINGLE_UPSTREAM, routing.servers, conns, replica_holds(cfg, conns), bulk, texts)
    return Layout((upstream,), health, bool(routing.ready), listing, None)


@dataclass(frozen=True)
class Several:
    """Several pools to route between: each as its replicas run it, which takes a request naming no model
    and which the other dialects, the njs script, and on a gateway its front."""

    pools: Sequence[Pool]
    default: str
    dialect: str
    script: Path
    front: GatewayFront | None = None


def host_pools(cfg: ServeConfig, pools: Sequence[Pool], script: Path | None) -> Several:
    default, dialect = pool_names(cfg)
    return Several(pools, default, dialect, script or route_script())


def gateway_pools(cfg: ServeConfig, front: GatewayFront, script: Path | None) -> Several:
    """A gateway's pools: one per model its hosts serve, with the gateway's own edge settings; the first
    model (the first host's) takes requests naming none."""
    pools = [
        Pool(key, cfg.model_copy(update={"engine": cfg.engine.model_copy(update={"served_model_name": m})}))
        for key, m in front.pools.items()
    ]
    first = next(iter(front.pools))
    return Several(pools, first, first, script or route_script(), front)


def several_layout(cfg: ServeConfig, routing: Routing, generation: int, several: Several) -> Layout:
    """Several pools: one upstream each, routing by model in route.js, /health with each pool's state."""
    if parse_size(cfg.nginx.client_max_body_size) == 0:
        raise ConfigError(
            "nginx.client_max_body_size: 0 (no limit) cannot route by model: njs reads the whole body "
            "in memory, so it needs a bound"
        )
    pools = several.pools
    edge = edge_pools(pools, routing, {p.name: edge_max_conns(p.cfg) for p in pools}, cfg.nginx.bulk_cap)
    first = next(p for p in edge if p.name == several.default)
    status, ok = health_status(edge, first.name)
    health: dict[str, Any] = {"status": status, "model": first.served, "family": first.family}
    health.update(ready=routing.ready, replicas=len(routing.servers), config=generation)
    health["pools"] = pools_health(edge)
    if several.front is not None:
        health["hosts"] = dict(several.front.hosts)
    pooled = {
        "pools": edge,
        "js_module": cfg.nginx.js_module,
        "script": str(several.script),
        "routes": routes_table(edge, first.name, cfg.nginx.retry_after_s),
        "models": models_list(edge),
        "keyed": cfg.auth.keys_file is not None,
        "default_upstream": pool_upstream(first.name),
        "internal_only": nginx_json(NATIVE.error("internal_only", INTERNAL_ONLY)),
        # Nginx on one address of its own: the replicas reach it there (plan.chimera_url), from it.
        "own_address": own_address(cfg.nginx.listen),
        "names": (first.name, several.dialect),
    }
    listing = None if several.front else _pool_listing(routing, edge, first, generation)
    return Layout(tuple(p.upstream for p in edge), health, ok, listing, pooled)


def _pool_listing(
    routing: Routing, edge: Sequence[EdgePool], first: EdgePool, generation: int
) -> dict[str, Any]:
    """/_hs/replicas of a host of several pools: each replica with its pool, and each pool's model."""
    replicas = [
        {"name": s.name, "addr": s.addr, "ready": not s.down, "pool": s.pool} for s in routing.servers
    ]
    listing: dict[str, Any] = {"model": first.served, "family": first.family, "config": generation}
    listing.update(replicas=replicas, pools={p.name: p.served for p in edge})
    return listing


def own_address(listen: str) -> str | None:
    """The address Nginx listens on when it is one specific non-loopback one (else None): a caller from
    there is this host's own process, as a loopback one is."""
    bare = listen.strip("[]")
    if bare in ("0.0.0.0", "*", "", "::") or bare.startswith("127.") or bare == "::1":
        return None
    return bare

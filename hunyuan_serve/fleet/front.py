"""The pools as Nginx sees them: upstreams, served names, the njs routing table, /health's pools."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from hunyuan_serve.auth import DIALECTS, NATIVE
from hunyuan_serve.config import ConfigError, Pool, ServeConfig, default_pool
from hunyuan_serve.fleet.routing import Routing, UpstreamServer

SINGLE_UPSTREAM = "hs_replicas"  # the one upstream of a single pool, named as it always was
# The njs script that routes by the body's model, packaged beside the template (pyproject package-data).
ROUTE_SCRIPT = "nginx/route.js"
# Bodies whose `model` picks the pool: OpenAI's two completions and our /translate (single and batch).
ROUTED_PATHS = ("/translate", "/v1/chat/completions", "/v1/completions")
# Paths whose API has a model of its own: any other path of theirs goes to the default pool.
MODEL_APIS = ("native", "openai")


@dataclass(frozen=True)
class Upstream:
    """One Nginx upstream block: a pool's replicas and the cap on each (edge_max_conns of its config)."""

    name: str
    servers: tuple[UpstreamServer, ...]
    max_conns: int


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


def served_name(cfg: ServeConfig) -> str:
    """The model a pool's replicas report (in /v1/models and every answer's `model`), and so the one
    name the edge routes to them: engine.served_model_name, else the model as given (what `up` makes
    the replicas' served name). No alias such as the last path component: the replica checks `model`
    against exactly this name, so a name the edge accepted beside it would be the replica's 404."""
    return cfg.engine.served_model_name or cfg.engine.model or ""


def family_of(cfg: ServeConfig) -> str | None:
    return None if cfg.engine.prompt_family == "auto" else cfg.engine.prompt_family


def pool_upstream(name: str) -> str:
    return f"hs_pool_{name}"


def edge_pools(pools: Sequence[Pool], routing: Routing, max_conns: Mapping[str, int]) -> tuple[EdgePool, ...]:
    """Each pool with its servers from the routing; a server of a pool the config lacks is an error."""
    grouped = routing.pools()
    unknown = sorted(set(grouped) - {p.name for p in pools})
    if unknown:
        raise ConfigError(f"the routing names pools the config lacks: {', '.join(unknown)}")
    seen: dict[str, str] = {}
    out = []
    for pool in pools:
        served = served_name(pool.cfg)
        if served and served in seen:
            raise ConfigError(
                f"pools {seen[served]} and {pool.name} both serve {served!r}: set engine.served_model_name "
                "in one of them, so a request's model names one pool"
            )
        seen[served] = pool.name
        upstream = Upstream(pool_upstream(pool.name), grouped.get(pool.name, ()), max_conns[pool.name])
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


def routes_table(pools: Sequence[EdgePool], cfg: ServeConfig) -> dict[str, Any]:
    """What route.js reads ($hs_routes): the named location of each served name and of no model, and
    the /v1/models list it answers once the key is checked."""
    return {
        "default": "@" + pool_upstream(default_pool(cfg)),
        "models": {p.served: "@" + p.upstream.name for p in pools if p.served},
        "list": models_list(pools),
    }


def pool_locations(proxied: Sequence[str], cfg: ServeConfig) -> list[dict[str, str]]:
    """The public locations with several pools: the routed paths run route.js; the other paths of the
    native and OpenAI APIs go to the default pool, the other dialects to nginx.dialect_pool."""
    dialect_of = {p: d.name for d in DIALECTS for p in d.prefixes}
    default = pool_upstream(default_pool(cfg))
    dialect = pool_upstream(cfg.nginx.dialect_pool or default_pool(cfg))
    rows: list[dict[str, str]] = []
    for path in (*proxied, *(p for p in ROUTED_PATHS if p not in proxied)):
        if path in ROUTED_PATHS:
            rows.append({"path": path, "js": "hs.route"})
        else:
            api = dialect_of.get(path, NATIVE.name)
            rows.append({"path": path, "upstream": default if api in MODEL_APIS else dialect})
    return rows


def route_script() -> Path:
    """The packaged route.js, read by this machine's Nginx (a pod mounts its own copy: k8s)."""
    return Path(str(resources.files("hunyuan_serve") / "templates" / ROUTE_SCRIPT))

"""Holding a request while no replica is ready: what hold.js reads, and the table of ready replicas (pure)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.edge.routing import Routing

HOLD_SCRIPT = "hold.js"
# Beside nginx.conf in Nginx's prefix: the replicas ready now, by pool (hold.js reads it per request).
READY_FILE = "ready.json"


def hold_script() -> Path:
    """The packaged hold.js, read by this machine's Nginx."""
    return Path(str(resources.files("hunyuan_serve.edge") / "templates" / HOLD_SCRIPT))


def ready_table(routing: Routing) -> dict[str, list[str]]:
    """The addresses of the ready replicas, by pool (every pool listed, an empty one too)."""
    return {pool: [s.addr for s in servers if not s.down] for pool, servers in routing.pools().items()}


def ready_file(cfg: ServeConfig, prefix: Path) -> Path | None:
    """Where the edge driver writes the ready replicas for hold.js under this Nginx prefix; None (no
    request held, the 503 at once) with nginx.hold_s 0 or where Nginx's njs module is not installed."""
    nginx = cfg.nginx
    return prefix / READY_FILE if nginx.hold_s and Path(nginx.js_module).is_file() else None


def hold_view(
    cfg: ServeConfig,
    routing: Routing,
    ready: Path | None,
    pools: dict[str, str],
    route_script: Path | None = None,
) -> dict[str, Any] | None:
    """What the template writes of the hold (None: off, without a ready file or with nginx.hold_s 0).
    pools: each upstream's pool as hold.js names it ($hs_pool: the pool's name, or with one pool the
    empty name, whose replicas are every one the ready file lists). routed: this config's ready replicas
    by that name, so that hold.js holds only a request whose pool had none. route_script: hold.js is
    read beside it (default: the packaged one)."""
    nginx = cfg.nginx
    if ready is None or not nginx.hold_s:
        return None
    by_pool = routing.pools()
    routed = {
        name: sum(not s.down for s in by_pool.get(name, ())) if name else routing.ready
        for name in pools.values()
    }
    settings = {"file": str(ready), "hold_s": nginx.hold_s, "poll_s": nginx.hold_poll_s, "routed": routed}
    script = route_script.parent / HOLD_SCRIPT if route_script else hold_script()
    return {"js_module": nginx.js_module, "script": str(script), "settings": settings, "pools": pools}

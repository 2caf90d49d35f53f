"""Who Nginx may route to, derived from the replicas' health states (the one source of readiness)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hunyuan_serve.config import DEFAULT_POOL
from hunyuan_serve.run.health import State


@dataclass(frozen=True)
class UpstreamServer:
    """One `server` line: every replica stays listed; those not routable are marked `down`."""

    addr: str
    down: bool
    name: str = ""  # the replica's, as the host's replica listing (/_hs/replicas) names it
    pool: str = DEFAULT_POOL  # the pool whose upstream lists it


@dataclass(frozen=True)
class Routing:
    """What the Nginx config needs to know about the replicas."""

    servers: tuple[UpstreamServer, ...]

    @property
    def ready(self) -> int:
        return sum(not s.down for s in self.servers)

    def pools(self) -> dict[str, tuple[UpstreamServer, ...]]:
        """Each pool's servers, pools in the order their first server comes."""
        grouped: dict[str, list[UpstreamServer]] = {}
        for server in self.servers:
            grouped.setdefault(server.pool, []).append(server)
        return {pool: tuple(servers) for pool, servers in grouped.items()}


def routing_from_states(
    members: Sequence[tuple[str, State]], names: Sequence[str] = (), pools: Sequence[str] = ()
) -> Routing:
    """Servers in replica order; only READY and UNHEALTHY (still under its probe budget) take traffic."""
    named = list(names) or [""] * len(members)
    pooled = list(pools) or [DEFAULT_POOL] * len(members)
    return Routing(
        tuple(
            UpstreamServer(addr, not state.routable, name, pool)
            for (addr, state), name, pool in zip(members, named, pooled, strict=True)
        )
    )

"""Who Nginx may route to, derived from the replicas' health states (the one source of readiness)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hunyuan_serve.supervise.health import State


@dataclass(frozen=True)
class UpstreamServer:
    """One `server` line: every replica stays listed; those not routable are marked `down`."""

    addr: str
    down: bool
    name: str = ""  # the replica's, as the host's replica listing (/_hs/replicas) names it


@dataclass(frozen=True)
class Routing:
    """What the Nginx config needs to know about the replicas."""

    servers: tuple[UpstreamServer, ...]

    @property
    def ready(self) -> int:
        return sum(not s.down for s in self.servers)


def routing_from_states(members: Sequence[tuple[str, State]], names: Sequence[str] = ()) -> Routing:
    """Servers in replica order; only READY and UNHEALTHY (still under its probe budget) take traffic."""
    named = list(names) or [""] * len(members)
    return Routing(
        tuple(
            UpstreamServer(addr, not state.routable, name)
            for (addr, state), name in zip(members, named, strict=True)
        )
    )

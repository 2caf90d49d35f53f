"""The supervisor's shared state, the items its queue carries, and the lookups every part of it uses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import jinja2

from hunyuan_serve.config import ServeConfig, SupervisorConfig
from hunyuan_serve.edge.routing import Routing, routing_from_states
from hunyuan_serve.fleet import health
from hunyuan_serve.fleet.seams import Clock, NginxControl, Prober, Runner
from hunyuan_serve.supervise.replica import Abandoned, Replica
from hunyuan_serve.supervise.rolling import RollingReload

Emit = Callable[..., None]
_T = TypeVar("_T")


@dataclass(frozen=True)
class Signalled:
    signum: int


@dataclass(frozen=True)
class TickDue:
    pass


@dataclass(frozen=True)
class NginxFailed:
    error: str


@dataclass(frozen=True)
class ReloadRequested:
    source: str


@dataclass(frozen=True)
class Seen:
    replica: Replica
    generation: int
    obs: health.Observation
    latency_ms: float | None = None
    pid: int | None = None


Item = Seen | Signalled | TickDue | NginxFailed | ReloadRequested


class SupervisorCore:
    """What the loop, the lifecycle actions, the Nginx task and the reporting share (set in Supervisor)."""

    cfg: ServeConfig
    sup: SupervisorConfig
    runner: Runner
    prober: Prober
    nginx: NginxControl
    clock: Clock
    emit: Emit
    run_dir: Path
    web_root: Path
    worker_user: str | None
    base_env: dict[str, str]
    info: dict[str, Any]
    rand: Callable[[], float]
    signals: tuple[int, ...]
    replicas: list[Replica]
    queue: asyncio.Queue[Item]
    reroute: asyncio.Event  # set by Reroute actions: wakes the Nginx task
    templates: jinja2.Environment  # loaded once: compiling the template took ~40 ms per reload
    config_generation: int
    routed: Routing | None  # what Nginx has loaded
    stopping: bool
    exit_code: int
    started_at: float
    abandoned: list[Abandoned]
    _background: list[asyncio.Task[None]]
    _nginx_exit: asyncio.Task[int | None] | None  # ends when the Nginx master exits
    incoming: list[Replica]  # started by a reload, not yet in their slot
    retiring: list[Replica]  # leaving: evicted, then stopped; never restarted
    rolling: RollingReload
    _cfg_stale: bool  # the config changed: Nginx must re-render even on the same routing
    _nginx_error: str | None  # the last reload Nginx refused, until one is taken
    _wake: asyncio.Event  # set when routing or a replica's state changed: reload steps re-check

    def _members(self) -> list[Replica]:
        """Who the routing lists and the clock drives: every slot's replica and those a reload starts."""
        return [r for r in (*self.replicas, *self.incoming) if not r.retiring]

    def _known(self) -> list[Replica]:
        """Every replica with a process or a task to answer for, retiring ones included."""
        return list({id(r): r for r in (*self.replicas, *self.incoming, *self.retiring)}.values())

    def _tag(self, replica: Replica) -> dict[str, Any]:
        """How events name a replica (and its pool); one a reload is starting also names the reload."""
        tag = {"replica": replica.plan.name, "pool": replica.plan.pool}
        return tag | ({"reload": replica.incoming} if replica.incoming else {})

    def routing(self) -> Routing:
        members = self._members()
        states = [(r.plan.addr, r.health.state) for r in members]
        return routing_from_states(states, [r.plan.name for r in members], [r.plan.pool for r in members])

    def _cancel_prober(self, replica: Replica) -> None:
        if replica.prober is not None:
            replica.prober.cancel()
            replica.prober = None

    def _is_routed(self, addr: str) -> bool:
        """Whether the config Nginx has taken sends traffic to addr."""
        return self.routed is not None and any(s.addr == addr and not s.down for s in self.routed.servers)

    async def _until(self, check: Callable[[], _T | None], timeout_s: float | None = None) -> _T | None:
        """check() once it is not None, re-checked whenever the loop sees a change; None after timeout_s."""
        deadline = None if timeout_s is None else self.clock.now() + timeout_s
        while (found := check()) is None:
            if deadline is not None and self.clock.now() >= deadline:
                return None
            self._wake.clear()
            waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._wake.wait())}
            if deadline is not None:
                waits.add(asyncio.ensure_future(self.clock.sleep(deadline - self.clock.now())))
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
        return found

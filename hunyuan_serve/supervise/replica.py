"""One supervised replica slot: its plan, its pure health state and its live handles."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hunyuan_serve.run.health import Health
from hunyuan_serve.run.plan import ReplicaPlan
from hunyuan_serve.run.seams import Proc


@dataclass(eq=False)  # compared by identity: a reload has two of one slot's name for a while
class Replica:
    """A replica's plan, its pure health state and the live handles that go with it."""

    plan: ReplicaPlan
    health: Health
    generation: int = 0  # bumped per launch, so late observations of an old process are dropped
    proc: Proc | None = None  # None until the spawn lands, and again once it has exited
    waiter: asyncio.Task[None] | None = None  # spawns the process, then waits for its exit
    prober: asyncio.Task[None] | None = None  # the probe loop, while the state is probed
    kill_pending: str | None = None  # a Kill that came while the spawn was still in progress
    last_probe_ms: float | None = None
    config: int = 0  # the reload whose config it runs (0: the one `up` started with)
    incoming: int | None = None  # the reload that started it, until it takes its slot
    retiring: bool = False  # replaced (or a failed incoming): out of the routing, stopped, never restarted
    reload_pid: int | None = None  # the pid it had when a reload retired it
    # Why it last left the upstream: its evicted event tells this, not the state it has reached by the
    # time Nginx's reload lands (a restart can come first on a loaded machine: "launched").
    left_because: str | None = None


@dataclass(frozen=True)
class Abandoned:
    """A killed process that did not exit, with the task still waiting for it."""

    replica: str
    proc: Proc | None
    waiter: asyncio.Task[None] | None

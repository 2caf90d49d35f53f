"""What travels the supervisor's queue: signals, ticks, observations, reload requests, Nginx's failure."""

from __future__ import annotations

from dataclasses import dataclass

from hunyuan_serve.run import health
from hunyuan_serve.supervise.replica import Replica


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

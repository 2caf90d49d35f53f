"""The replica's lifecycle: the one stored phase, its transitions, and the health reading derived from it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from hunyuan_serve.config.replica import PARENT_PID_ENV
from hunyuan_serve.replica.engine.interface import Engine


class Phase(str, Enum):
    """How far loading got: the only lifecycle fact the replica stores."""

    LOADING = "loading"
    WARMING = "warming"
    READY = "ready"
    FAILED = "failed"


class ReportedHealth(str, Enum):
    """What /health reports: the phase, or for a ready replica what its engine shows (dead, hung)."""

    LOADING = "loading"
    WARMING = "warming"
    READY = "ready"
    FAILED = "failed"
    DEAD = "dead"
    HUNG = "hung"


# Loading only moves forward; a failure is final (the process exits and the supervisor restarts it).
TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.LOADING: frozenset({Phase.WARMING, Phase.FAILED}),
    Phase.WARMING: frozenset({Phase.READY, Phase.FAILED}),
    Phase.READY: frozenset(),
    Phase.FAILED: frozenset(),
}

_REASONS = {Phase.LOADING: "model loading", Phase.WARMING: "first translation running", Phase.READY: ""}


class InvalidTransition(RuntimeError):
    """A lifecycle move the table does not allow: a bug in the caller, never a client's fault."""


@dataclass(frozen=True)
class Reading:
    """One health reading: the status and, unless ready, why not."""

    health: ReportedHealth
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.health is ReportedHealth.READY


class Lifecycle:
    """The phase and its reason; moves only along TRANSITIONS."""

    def __init__(self) -> None:
        self.phase = Phase.LOADING
        self.reason = _REASONS[Phase.LOADING]

    @property
    def loading(self) -> bool:
        return self.phase is Phase.LOADING

    @property
    def ready(self) -> bool:
        return self.phase is Phase.READY

    def move(self, to: Phase, reason: str | None = None) -> None:
        if to not in TRANSITIONS[self.phase]:
            raise InvalidTransition(f"replica cannot go from {self.phase.value} to {to.value}")
        self.phase = to
        self.reason = _REASONS.get(to, "") if reason is None else reason


def read_health(
    phase: Phase, reason: str, engine_alive: bool, stalled_s: float, unfinished: int, stall_timeout_s: float
) -> Reading:
    """The reading of a phase and the engine's facts: a ready replica is dead or hung when its engine is."""
    if phase is not Phase.READY:
        return Reading(ReportedHealth(phase.value), reason)
    if not engine_alive:
        return Reading(ReportedHealth.DEAD, "engine loop stopped")
    if stall_timeout_s > 0 and stalled_s >= stall_timeout_s:
        return Reading(
            ReportedHealth.HUNG,
            f"engine took no step for {stalled_s:.0f}s with {unfinished} request(s) unfinished "
            f"(stall_timeout_s={stall_timeout_s:g})",
        )
    return Reading(ReportedHealth.READY)


async def load(
    lifecycle: Lifecycle,
    engine: Engine,
    warm_up: Callable[[], Awaitable[object]],
    warmup_timeout_s: float,
    on_fatal: Callable[[str], None] | None,
) -> None:
    """Start the engine, run the first translation, then ready; any failure is final and reported."""
    try:
        await engine.start()
        lifecycle.move(Phase.WARMING)
        await asyncio.wait_for(warm_up(), warmup_timeout_s)
        lifecycle.move(Phase.READY)
    except Exception as err:  # any load failure makes this replica unusable; say why, then stop
        lifecycle.move(Phase.FAILED, f"{type(err).__name__}: {err}"[:500])
        logging.getLogger(__name__).exception("replica failed to load")
        if on_fatal is not None:
            on_fatal(lifecycle.reason)


def watched_parent(env: Mapping[str, str]) -> int | None:
    """The pid of the `up` that started this replica (PARENT_PID_ENV), or None: nothing to watch.

    A replica run by systemd or Kubernetes has no such variable, so its parent being init (or the
    container having no parent at all) never stops it.
    """
    try:
        pid = int(env.get(PARENT_PID_ENV, ""))
    except ValueError:
        return None
    return pid if pid > 1 else None


def parent_gone(expected: int | None, ppid: int) -> bool:
    """Whether the watched parent is gone: an orphan is re-parented, so its ppid no longer names it.

    As gunicorn's workers do with their master (gunicorn/workers/base.py keeps self.ppid; sync.py and
    gthread.py's is_parent_alive: `if self.ppid != os.getppid()`: "Parent changed, shutting down").
    """
    return expected is not None and ppid != expected

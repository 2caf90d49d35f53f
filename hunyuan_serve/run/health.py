"""The pure replica health state machine: observations in, (state, actions) out; no clock, no I/O."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from hunyuan_serve.config import SupervisorConfig


class State(enum.StrEnum):
    """Where a replica stands; only READY and UNHEALTHY replicas are in the Nginx upstream."""

    STARTING = "starting"  # process launched, waiting for its first 200 /health (startup deadline)
    READY = "ready"  # in the upstream
    UNHEALTHY = "unhealthy"  # in the upstream, but failing probes (fewer than the threshold)
    EVICTED = "evicted"  # out of the upstream, process being killed (abandoned if it never exits)
    RESTARTING = "restarting"  # out of the upstream, process gone, waiting out the backoff
    FAILED = "failed"  # crash-loop budget spent: stays out until `up` restarts

    @property
    def routable(self) -> bool:
        return self in (State.READY, State.UNHEALTHY)

    @property
    def has_process(self) -> bool:
        return self in (State.STARTING, State.READY, State.UNHEALTHY, State.EVICTED)

    @property
    def probed(self) -> bool:
        return self in (State.STARTING, State.READY, State.UNHEALTHY)


# -- observations: what the supervisor saw ----------------------------------------------------


@dataclass(frozen=True)
class Exited:
    """The replica's process ended (returncode None: it could not be started at all)."""

    now: float
    returncode: int | None


@dataclass(frozen=True)
class Probe:
    """One /health probe answered (ok) or not (timeout, refused, non-200)."""

    now: float
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class Tick:
    """Time passed: deadlines and backoff delays are checked."""

    now: float


Observation = Exited | Probe | Tick


# -- actions: what the supervisor must do -------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """Launch the replica's process."""


@dataclass(frozen=True)
class Kill:
    """End the replica's process now (SIGKILL works on stopped processes too)."""

    reason: str


@dataclass(frozen=True)
class Abandon:
    """Stop waiting for the killed process to exit; a new one will be started beside it."""

    reason: str


@dataclass(frozen=True)
class Reroute:
    """Upstream membership changed: re-render and reload Nginx."""


Action = Start | Kill | Abandon | Reroute


# -- the state ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Health:
    """Everything the machine remembers about one replica."""

    state: State = State.RESTARTING
    since: float = 0.0
    reason: str = "not started"
    probe_failures: int = 0  # consecutive
    launches: int = 0
    failure_times: tuple[float, ...] = field(default_factory=tuple)  # inside the crash-loop window
    attempt: int = 0  # failures since the replica was last ready: drives the backoff
    restart_at: float | None = 0.0

    @property
    def restarts(self) -> int:
        return max(0, self.launches - 1)


def initial(now: float) -> Health:
    """A replica not yet started: the first Tick starts it."""
    return Health(state=State.RESTARTING, since=now, reason="not started", restart_at=now)


def backoff_delay(attempt: int, cfg: SupervisorConfig, rand: float) -> float:
    """Exponential delay for the attempt-th restart (1-based), plus jitter; rand is in [0, 1)."""
    if attempt <= 0:
        return 0.0
    base = min(cfg.restart_backoff_max_s, cfg.restart_backoff_base_s * 2 ** (attempt - 1))
    return base * (1.0 + cfg.restart_backoff_jitter * rand)


def _move(h: Health, state: State, now: float, reason: str, **changes: object) -> Health:
    return replace(h, state=state, since=now, reason=reason, **changes)  # type: ignore[arg-type]


def _failure(h: Health, now: float, reason: str, cfg: SupervisorConfig, rand: float) -> Health:
    """Count a failure against the crash-loop budget; decide between a restart and FAILED."""
    recent = (*(t for t in h.failure_times if now - t < cfg.crash_loop_window_s), now)
    if len(recent) >= cfg.crash_loop_budget:
        return _move(
            h,
            State.FAILED,
            now,
            f"{reason}; crash loop: {len(recent)} failures",
            failure_times=recent,
            restart_at=None,
            probe_failures=0,
        )
    attempt = h.attempt + 1
    return _move(
        h,
        State.RESTARTING,
        now,
        reason,
        failure_times=recent,
        attempt=attempt,
        restart_at=now + backoff_delay(attempt, cfg, rand),
        probe_failures=0,
    )


Step = tuple[Health, list[Action]]


def step(h: Health, obs: Observation, cfg: SupervisorConfig, rand: float = 0.0) -> Step:
    """Advance one replica's state by one observation; rand in [0, 1) feeds the backoff jitter."""
    if h.state is State.FAILED:
        return h, []
    if isinstance(obs, Exited):
        return _exited(h, obs, cfg, rand)
    if isinstance(obs, Probe):
        return _probed(h, obs, cfg, rand)
    return _ticked(h, obs.now, cfg, rand)


def _exited(h: Health, obs: Exited, cfg: SupervisorConfig, rand: float) -> Step:
    now = obs.now
    if not h.state.has_process:
        return h, []
    how = "could not be started" if obs.returncode is None else f"exited with code {obs.returncode}"
    if h.state is State.EVICTED:
        # The kill we asked for: the failure was counted when it was evicted.
        nxt = _move(h, State.RESTARTING, now, f"{h.reason}; {how}", probe_failures=0)
        if nxt.restart_at is None:
            nxt = replace(nxt, restart_at=now)
        return nxt, []
    nxt = _failure(h, now, how, cfg, rand)
    return nxt, [Reroute()] if h.state.routable else []


def _probed(h: Health, obs: Probe, cfg: SupervisorConfig, rand: float) -> Step:
    now = obs.now
    if not h.state.probed:
        return h, []
    if obs.ok:
        if h.state is State.READY and h.probe_failures == 0:
            return h, []
        if h.state is State.STARTING:
            return _move(h, State.READY, now, "health 200", probe_failures=0, attempt=0), [Reroute()]
        return _move(h, State.READY, now, "health 200 again", probe_failures=0), []
    if h.state is State.STARTING:
        return h, []  # a loading replica answers nothing; only the startup deadline counts
    failures = h.probe_failures + 1
    why = f"{failures} failed probe(s): {obs.detail}"
    if failures >= cfg.unhealthy_threshold:
        nxt = _failure(h, now, f"evicted after {why}", cfg, rand)
        # Keep FAILED if the budget is spent; otherwise wait in EVICTED for the kill to land.
        if nxt.state is not State.FAILED:
            nxt = replace(nxt, state=State.EVICTED)
        return nxt, [Reroute(), Kill(nxt.reason)]
    since = now if h.state is State.READY else h.since
    return _move(h, State.UNHEALTHY, since, why, probe_failures=failures), []


def _ticked(h: Health, now: float, cfg: SupervisorConfig, rand: float) -> Step:
    if h.state is State.STARTING and now - h.since >= cfg.startup_timeout_s:
        reason = f"not ready within startup_timeout_s={cfg.startup_timeout_s:g}"
        nxt = _failure(h, now, reason, cfg, rand)
        if nxt.state is not State.FAILED:
            nxt = replace(nxt, state=State.EVICTED)
        return nxt, [Kill(reason)]
    if h.state is State.EVICTED and now - h.since >= cfg.abandon_after_s:
        # SIGKILL cannot end a process stuck in the kernel (a hung GPU driver call, a task the
        # scheduler lost): start a new one beside it rather than wait for an exit that never comes.
        reason = f"{h.reason}; still not gone {cfg.abandon_after_s:g}s after SIGKILL, abandoned"
        return _move(h, State.RESTARTING, now, reason, restart_at=h.restart_at or now), [Abandon(reason)]
    if h.state is State.RESTARTING and h.restart_at is not None and now >= h.restart_at:
        return _move(
            h, State.STARTING, now, "launched", launches=h.launches + 1, restart_at=None, probe_failures=0
        ), [Start()]
    return h, []

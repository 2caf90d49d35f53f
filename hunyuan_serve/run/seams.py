"""The small protocols the supervisor loop depends on (processes, probes, Nginx, time), and the real clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from hunyuan_serve.logrotate import LogFile
from hunyuan_serve.run.plan import ReplicaPlan
from hunyuan_serve.run.probe import ProbeResult


class Proc(Protocol):
    """A started process as the runner hands it out (asyncio's Process is one)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


class Runner(Protocol):
    """Starts, kills and waits for replica processes."""

    async def spawn(self, plan: ReplicaPlan, env: Mapping[str, str]) -> Proc:
        """Start the replica's process; raises when it cannot be started."""
        ...

    def kill(self, proc: Proc) -> None:
        """End it now, with everything it started (works on a stopped process too)."""
        ...

    async def wait(self, proc: Proc) -> int | None:
        """Wait until it has exited; returns its exit code."""
        ...

    async def stop(self, proc: Proc, grace_s: float) -> None:
        """Ask it to stop, give it grace_s, then kill it."""
        ...


class Prober(Protocol):
    """Asks a replica whether it is healthy."""

    async def probe(self, addr: str, *, deep: bool = False) -> ProbeResult: ...

    async def aclose(self) -> None: ...


class NginxControl(Protocol):
    """The one Nginx in front of the replicas: every config it is given is checked before it is used."""

    @property
    def prefix(self) -> Path: ...

    async def start(self, text: str, log_path: Path) -> int:
        """Start Nginx on this config; returns the master's pid; NginxError if it does not come up."""
        ...

    async def reload(self, text: str, generation: int) -> dict[str, float]:
        """Switch to this config; NginxError (the old one stays) if it is refused or not taken in time."""
        ...

    async def wait(self) -> int | None:
        """Return when the running master exits, with its exit code."""
        ...

    async def stop(self, drain_s: float) -> None: ...

    def logs(self) -> list[LogFile]:
        """Its log files, each with the way to make Nginx reopen it after a rotation."""
        ...

    def describe(self) -> dict[str, object]: ...


class Clock(Protocol):
    """Monotonic time and sleeping on it; a fake one drives probes, ticks and backoff in tests."""

    def now(self) -> float: ...

    def wall(self) -> float:
        """Seconds since the epoch: only for the timestamps people read (state files), never for timing."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """time.monotonic and asyncio.sleep."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

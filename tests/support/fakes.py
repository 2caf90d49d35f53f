"""The fakes of the supervisor's and the gateway's seams (run.seams, reload.Source, discovery): one set.

No sleeps, no processes, no sockets. The clock either wakes sleepers in deadline order when the test
advances it (the supervisor's histories) or lets each sleep pass its time at once (`instant`: the gateway's
loop, stepped by hand); processes, probes and Nginx answer as the test scripts them.
"""

from __future__ import annotations

import asyncio
import copy
import heapq
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hunyuan_serve.config import ConfigError, ServeConfig, build_config
from hunyuan_serve.edge.controller import NginxError
from hunyuan_serve.gateway.discovery import DiscoveryError
from hunyuan_serve.gateway.hosts import HostListing
from hunyuan_serve.logrotate import LogFile
from hunyuan_serve.models import ModelError
from hunyuan_serve.run.plan import ReplicaPlan, plan_replicas
from hunyuan_serve.run.probe import ProbeResult
from hunyuan_serve.run.seams import Proc
from hunyuan_serve.supervise.reload import Prepared, Source


async def settle() -> None:
    """Run every task until all wait on something only the clock or the test can give."""
    loop = asyncio.get_running_loop()
    for _ in range(10_000):
        await asyncio.sleep(0)
        if not loop._ready:  # type: ignore[attr-defined]  # nothing else runnable: all blocked
            return
    raise AssertionError("tasks never settled")


class FakeClock:
    """Time moves only when the test says: `advance_to` wakes sleepers in deadline order, letting every
    task run after each; `instant` clocks let a sleep pass its time at once instead."""

    def __init__(self, instant: bool = False) -> None:
        self.t = 0.0
        self.instant = instant
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    def wall(self) -> float:
        return 1_700_000_000.0 + self.t  # a fixed epoch: the state files' timestamps are reproducible

    async def sleep(self, seconds: float) -> None:
        if self.instant:
            self.t += seconds
            await asyncio.sleep(0)
            return
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.t + seconds, next(self._seq), wake))
        await wake

    async def advance_to(self, end: float) -> None:
        """Wake sleepers in deadline order up to `end`, letting everything run after each."""
        while True:
            await settle()
            while self._sleepers and self._sleepers[0][2].done():  # cancelled sleeps
                heapq.heappop(self._sleepers)
            if not self._sleepers or self._sleepers[0][0] > end:
                break
            when, _, wake = heapq.heappop(self._sleepers)
            self.t = max(self.t, when)
            wake.set_result(None)
        self.t = max(self.t, end)
        await settle()


class FakeProc:
    """A replica process: it answers probes as `answer` says and exits when told (or killed)."""

    def __init__(self, pid: int, name: str, answer: str, addr: str = "") -> None:
        self.pid, self.name, self.answer, self.addr = pid, name, answer, addr
        self.unkillable = False  # stuck in the kernel: SIGKILL does not end it
        self._exit: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    @property
    def returncode(self) -> int | None:
        return self._exit.result() if self._exit.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exit)

    def exit(self, code: int) -> None:
        if not self._exit.done():
            self._exit.set_result(code)


class FakeRunner:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.procs: list[FakeProc] = []
        self.answer: dict[str, str] = {}  # what a new process of that replica answers (default ok)
        self.spawn_s: dict[str, float] = {}  # how long a spawn of that replica takes
        self.fail: dict[str, str] = {}  # the next spawn of that replica raises this
        self.killed: list[int] = []
        self.stopped: list[int] = []

    async def spawn(self, plan: ReplicaPlan, env: Mapping[str, str]) -> Proc:
        if plan.name in self.spawn_s:
            await self.clock.sleep(self.spawn_s[plan.name])
        if plan.name in self.fail:
            raise OSError(self.fail.pop(plan.name))
        proc = FakeProc(4000 + len(self.procs), plan.name, self.answer.get(plan.name, "ok"), plan.addr)
        self.procs.append(proc)
        return proc

    def kill(self, proc: Proc) -> None:
        assert isinstance(proc, FakeProc)
        self.killed.append(proc.pid)
        if not proc.unkillable:
            proc.exit(-9)

    async def wait(self, proc: Proc) -> int | None:
        return await proc.wait()

    async def stop(self, proc: Proc, grace_s: float) -> None:
        assert isinstance(proc, FakeProc)
        self.stopped.append(proc.pid)
        proc.exit(-15)

    def latest(self, name: str) -> FakeProc:
        return [p for p in self.procs if p.name == name][-1]

    def alive(self) -> list[int]:
        return [p.pid for p in self.procs if p.returncode is None]


class FakeProber:
    """Probes answer "ok" unless the address is in `failing`; with a runner, as the newest live process on
    that address says (none: refused; a hung one takes probe_timeout_s). Every probed address is kept."""

    def __init__(self, clock: FakeClock, runner: FakeRunner | None = None) -> None:
        self.clock, self.runner = clock, runner
        self.failing: set[str] = set()
        self.probed: list[str] = []
        self.closed = False

    def _answer(self, addr: str) -> str:
        if addr in self.failing:
            return "refused"
        if self.runner is None:
            return "ok"
        procs = [p for p in self.runner.procs if p.addr == addr and p.returncode is None]
        return procs[-1].answer if procs else "refused"

    async def probe(self, addr: str, *, deep: bool = False) -> ProbeResult:
        self.probed.append(addr)
        answer = self._answer(addr)
        if answer == "hang":
            await self.clock.sleep(2.0)
            return ProbeResult(False, "timeout", 2000.0)
        return ProbeResult(answer == "ok", "200" if answer == "ok" else "ConnectError", 1.0)

    async def aclose(self) -> None:
        self.closed = True


_SERVER = re.compile(r"^\s*server (\S+) max_fails[^;]*?( down)?;$", re.MULTILINE)


class FakeNginx:
    """Keeps every config it took; can be slow to reload, refuse a config, exit, or fail to start."""

    def __init__(self, clock: FakeClock, prefix: Path) -> None:
        self.clock, self.prefix = clock, prefix
        self.configs: list[str] = []  # the one it started on, then each reload it took
        self.reload_s = 0.0
        self.reject: str | None = None
        self.fail_start: str | None = None
        self.starts = 0
        self.reloads: list[float] = []  # when each reload began, taken or not
        self.stopped = False
        self.reopened = 0  # USR1s: times it was told to reopen its logs
        self._exit: asyncio.Future[int] | None = None

    @property
    def text(self) -> str:
        """The config it serves now."""
        return self.configs[-1] if self.configs else ""

    async def start(self, text: str, log_path: Path) -> int:
        if self.fail_start:
            raise NginxError(self.fail_start)
        self.starts += 1
        self.configs.append(text)
        self._exit = asyncio.get_running_loop().create_future()
        return 700 + self.starts

    async def reload(self, text: str, generation: int) -> dict[str, float]:
        self.reloads.append(self.clock.now())
        await self.clock.sleep(self.reload_s)
        if self.reject:
            raise NginxError(f"nginx -t rejected the config: {self.reject}")
        self.configs.append(text)
        return {"check_ms": 1.0, "switch_ms": 2.0}

    async def wait(self) -> int | None:
        assert self._exit is not None
        return await asyncio.shield(self._exit)

    def exit(self, code: int) -> None:
        assert self._exit is not None
        self._exit.set_result(code)

    async def stop(self, drain_s: float) -> None:
        self.stopped = True

    def logs(self) -> list[LogFile]:
        return [LogFile(self.prefix / "logs" / "access.log", self._reopen)]

    def _reopen(self) -> None:
        self.reopened += 1

    def describe(self) -> dict[str, object]:
        return {"pid": None if self.stopped else 700 + self.starts}

    def upstream(self) -> dict[str, bool]:
        """addr -> routed, as the served config says."""
        return {addr: not down for addr, down in _SERVER.findall(self.text)}

    def routed(self) -> list[str]:
        """Addresses the served config sends traffic to."""
        return [addr for addr, down in _SERVER.findall(self.text) if not down]


class FakeDiscovery:
    """Each host's listing (or the error its fetch raises) as the test sets it in `answers`."""

    def __init__(self) -> None:
        self.answers: dict[str, HostListing | str] = {}
        self.closed = False

    async def fetch(self, url: str) -> HostListing:
        answer = self.answers[url]
        if isinstance(answer, str):
            raise DiscoveryError(answer)
        return answer

    async def aclose(self) -> None:
        self.closed = True


@dataclass
class FakeSource:
    """The config file `up` was started with, as a mapping the test edits; prepare may fail."""

    settings: dict[str, Any]
    run_dir: Path
    gpus: Sequence[int] = ()
    read_error: str | None = None
    prepare_error: str | None = None
    busy: dict[int, str] = field(default_factory=dict)
    reads: int = 0

    def source(self) -> Source:
        return Source(build_config(copy.deepcopy(self.settings), {}), self.read, self.prepare, self.port)

    async def read(self) -> ServeConfig:
        self.reads += 1
        if self.read_error:
            raise ConfigError(self.read_error)
        return build_config(copy.deepcopy(self.settings), {})

    async def prepare(self, cfg: ServeConfig) -> Prepared:
        if self.prepare_error:
            raise ModelError(self.prepare_error)
        plans = plan_replicas(
            cfg, visible_gpus=list(self.gpus), cores=[0, 1], run_dir=self.run_dir, python="python"
        )
        return Prepared(cfg, plans, {"model": cfg.engine.model or "m"})

    def port(self, host: str, port: int) -> str | None:
        return self.busy.get(port)

    def edit(self) -> None:
        """What the user does before a reload: a setting every replica reads gets a new value."""
        replica = self.settings.setdefault("replica", {})
        replica["max_tokens"] = replica.get("max_tokens", 512) + 1

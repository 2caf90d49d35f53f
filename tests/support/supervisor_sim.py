"""The supervisor on fakes: processes, probes, Nginx and a clock that the histories drive (no sleeps).

No sleeps, no processes, no sockets: the fake clock wakes sleepers in deadline order and lets every
task run in between, so each history is deterministic and takes milliseconds. Shared by the supervisor
and the rolling-reload histories.
"""

from __future__ import annotations

import asyncio
import copy
import heapq
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hunyuan_serve.config import ConfigError, ServeConfig, build_config
from hunyuan_serve.fleet.nginx import NginxError
from hunyuan_serve.fleet.plan import ReplicaPlan, plan_replicas
from hunyuan_serve.fleet.probe import ProbeResult
from hunyuan_serve.fleet.seams import Proc
from hunyuan_serve.logrotate import LogFile
from hunyuan_serve.models import ModelError
from hunyuan_serve.supervise.reload import Prepared, Source
from hunyuan_serve.supervise.supervisor import Supervisor

SETTINGS: dict[str, Any] = {
    "replicas": 2,
    "base_port": 9100,
    "supervisor": {
        "probe_interval_s": 1.0,
        "probe_timeout_s": 2.0,
        "unhealthy_threshold": 3,
        "startup_timeout_s": 30.0,
        "restart_backoff_base_s": 1.0,
        "restart_backoff_jitter": 0.0,
        "crash_loop_budget": 3,
        "crash_loop_window_s": 100.0,
        "abandon_after_s": 10.0,
        "tick_s": 0.5,
        "deep_probe_every": 0,
    },
    "nginx": {"port": 8080, "reload_retry_s": 2.0},
}


# -- fakes ---------------------------------------------------------------------------------------


async def settle() -> None:
    """Run every task until all wait on something only the clock or the test can give."""
    loop = asyncio.get_running_loop()
    for _ in range(10_000):
        await asyncio.sleep(0)
        if not loop._ready:  # type: ignore[attr-defined]  # nothing else runnable: all blocked
            return
    raise AssertionError("tasks never settled")


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    def wall(self) -> float:
        return 1_700_000_000.0 + self.t  # a fixed epoch: the state files' timestamps are reproducible

    async def sleep(self, seconds: float) -> None:
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
    """Answers for the newest live process on that address; a hung one takes probe_timeout_s."""

    def __init__(self, clock: FakeClock, runner: FakeRunner) -> None:
        self.clock, self.runner = clock, runner
        self.closed = False

    async def probe(self, addr: str, *, deep: bool = False) -> ProbeResult:
        procs = [p for p in self.runner.procs if p.addr == addr and p.returncode is None]
        answer = procs[-1].answer if procs else "refused"
        if answer == "hang":
            await self.clock.sleep(2.0)
            return ProbeResult(False, "timeout", 2000.0)
        return ProbeResult(answer == "ok", "200" if answer == "ok" else "ConnectError", 1.0)

    async def aclose(self) -> None:
        self.closed = True


_SERVER = re.compile(
    r"^\s*server (\S+) max_fails=\S+ fail_timeout=\S+?(?: max_conns=\d+)?( down)?;$", re.MULTILINE
)


class FakeNginx:
    """Keeps the config text it serves; can be slow to reload, refuse a config, exit, or fail to start."""

    def __init__(self, clock: FakeClock, prefix: Path) -> None:
        self.clock, self.prefix = clock, prefix
        self.text = ""
        self.reload_s = 0.0
        self.reject: str | None = None
        self.fail_start: str | None = None
        self.starts = 0
        self.reloads: list[float] = []  # when each reload began
        self.stopped = False
        self.reopened = 0  # USR1s: times it was told to reopen its logs
        self._exit: asyncio.Future[int] | None = None

    async def start(self, text: str, log_path: Path) -> int:
        if self.fail_start:
            raise NginxError(self.fail_start)
        self.starts += 1
        self.text = text
        self._exit = asyncio.get_running_loop().create_future()
        return 700 + self.starts

    async def reload(self, text: str, generation: int) -> dict[str, float]:
        self.reloads.append(self.clock.now())
        await self.clock.sleep(self.reload_s)
        if self.reject:
            raise NginxError(f"nginx -t rejected the config: {self.reject}")
        self.text = text
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

    def routed(self) -> list[str]:
        """Addresses the served config sends traffic to."""
        return [addr for addr, down in _SERVER.findall(self.text) if not down]


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


@dataclass
class Sim:
    """One supervisor on fakes; `at(t)` runs the world up to time t."""

    cfg: ServeConfig
    plans: list[ReplicaPlan]
    clock: FakeClock
    runner: FakeRunner
    prober: FakeProber
    nginx: FakeNginx
    run_dir: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    task: asyncio.Task[int] | None = None
    sup: Supervisor | None = None
    source: Source | None = None  # where a reload reads its config (None: reload refused)

    def start(self) -> None:
        def emit(event: str, **fields: Any) -> None:
            self.events.append({"t": self.clock.now(), "event": event, **fields})

        self.sup = Supervisor(
            self.cfg,
            self.plans,
            runner=self.runner,
            prober=self.prober,
            nginx=self.nginx,
            clock=self.clock,
            emit=emit,
            run_dir=self.run_dir,
            web_root=self.run_dir / "web",
            worker_user=None,
            base_env={},
            info={"model": "m", "family": "hunyuan"},
            rand=lambda: 0.0,
            signals=(),
            reload_source=self.source,
        )
        self.task = asyncio.create_task(self.sup.run())

    async def at(self, t: float) -> None:
        await self.clock.advance_to(t)
        if self.task is not None and self.task.done():
            self.task.result()  # an error in the loop fails the test here

    async def stop(self) -> int:
        assert self.sup is not None and self.task is not None
        self.sup.request_stop()
        await self.clock.advance_to(self.clock.t + 1)
        assert self.task.done()
        return self.task.result()

    def addr(self, name: str) -> str:
        return next(p.addr for p in self.plans if p.name == name)

    def of(self, name: str, event: str | None = None, since: float = 0.0) -> list[dict[str, Any]]:
        """Events about replica `name` (all of them, or those named `event`) from time `since` on."""
        return [
            e
            for e in self.events
            if e.get("replica") == name and e["t"] >= since and (event is None or e["event"] == event)
        ]

    def named(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == event]

    def story(self, name: str, since: float = 0.0) -> list[str]:
        """What happened to replica `name`, one word per event (transitions as from>to)."""
        return [
            f"{e['from']}>{e['to']}" if e["event"] == "transition" else e["event"]
            for e in self.of(name, since=since)
        ]

    def state(self) -> dict[str, Any]:
        data = json.loads((self.run_dir / "state.json").read_text())
        assert isinstance(data, dict)
        return data


def settings_with(supervisor: Mapping[str, Any], **top: Any) -> dict[str, Any]:
    """SETTINGS with some supervisor fields (and top-level keys or sections) replaced."""
    return {**SETTINGS, **top, "supervisor": {**SETTINGS["supervisor"], **supervisor}}


class Sims:
    """Makes Sims in one directory; `close` stops any loop a failed test left running."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.made: list[Sim] = []

    def make(
        self, settings: Mapping[str, Any] | None = None, gpus: Sequence[int] = (), **supervisor: Any
    ) -> Sim:
        cfg = build_config(dict(settings) if settings is not None else settings_with(supervisor), {})
        plans = plan_replicas(
            cfg, visible_gpus=list(gpus), cores=[0, 1], run_dir=self.tmp_path, python="python"
        )
        clock = FakeClock()
        runner = FakeRunner(clock)
        prober = FakeProber(clock, runner)
        nginx = FakeNginx(clock, self.tmp_path / "nginx")
        sim = Sim(cfg, plans, clock, runner, prober, nginx, self.tmp_path)
        self.made.append(sim)
        return sim

    async def close(self) -> None:
        for sim in self.made:
            if sim.task is not None and not sim.task.done():
                sim.task.cancel()
                await asyncio.gather(sim.task, return_exceptions=True)

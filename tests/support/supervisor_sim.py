"""The supervisor on the fakes of tests/support/fakes.py, driven by a fake clock (no sleeps).

Each history is deterministic and takes milliseconds. Shared by the supervisor, pool and rolling-reload
histories.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hunyuan_serve.config import ServeConfig, build_config
from hunyuan_serve.run.plan import ReplicaPlan, plan_replicas
from hunyuan_serve.supervise.reload import Source
from hunyuan_serve.supervise.supervisor import Supervisor
from tests.support.fakes import FakeClock, FakeNginx, FakeProber, FakeRunner

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

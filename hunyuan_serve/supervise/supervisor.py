"""The one supervision loop: observes exits, probes and the clock, applies health.step, acts.

Facts and where they come from: `transition` events are the replicas' health states (actions.py's
`_apply`); `admitted`/`evicted` say what Nginx routes to, emitted only once Nginx has taken a config
(nginx_task.py's `_routed`); `reload_*` events tell a rolling reload (SIGHUP, `hunyuan-serve reload`):
rolling.RollingReload drives it, one replica at a time through the same paths (slots.py: a new Replica
started, admitted, then the old one retired).
"""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hunyuan_serve import logrotate
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.edge.render import environment
from hunyuan_serve.fleet import health
from hunyuan_serve.fleet.plan import ReplicaPlan
from hunyuan_serve.fleet.seams import Clock, NginxControl, Prober, Runner
from hunyuan_serve.supervise import reload
from hunyuan_serve.supervise.core import Emit, Item, NginxFailed, ReloadRequested, Seen, Signalled, TickDue
from hunyuan_serve.supervise.nginx_task import NginxTask
from hunyuan_serve.supervise.replica import Replica
from hunyuan_serve.supervise.report import Shutdown
from hunyuan_serve.supervise.rolling import RollingReload
from hunyuan_serve.supervise.slots import Slots


class Supervisor(Slots, NginxTask, Shutdown):
    """Runs the replicas and Nginx until a signal (or `request_stop`) asks it to stop; see `run`.

    The parts: core (shared state), actions (per-replica lifecycle), nginx_task (routing and Nginx),
    slots (what a rolling reload drives), report (the state file and the shutdown)."""

    def __init__(
        self,
        cfg: ServeConfig,
        plans: list[ReplicaPlan],
        *,
        runner: Runner,
        prober: Prober,
        nginx: NginxControl,
        clock: Clock,
        emit: Emit,
        run_dir: Path,
        web_root: Path,
        worker_user: str | None,
        base_env: Mapping[str, str],
        info: Mapping[str, Any],
        rand: Callable[[], float] = random.random,
        signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP),
        reload_source: reload.Source | None = None,
    ) -> None:
        self.cfg, self.sup = cfg, cfg.supervisor
        self.runner, self.prober, self.nginx, self.clock = runner, prober, nginx, clock
        self.emit = emit
        self.run_dir, self.web_root, self.worker_user = run_dir, web_root, worker_user
        self.base_env, self.info = dict(base_env), dict(info)
        self.rand = rand
        self.signals = tuple(signals)
        self.replicas = [Replica(plan, health.initial(clock.now())) for plan in plans]
        self.queue = asyncio.Queue()
        self.reroute = asyncio.Event()
        self.templates = environment()
        self.config_generation = 0
        self.routed = None
        self.stopping = False
        self.exit_code = 0
        self.started_at = self.clock.wall()
        self.abandoned = []
        self._background = []
        self._nginx_exit = None
        self.incoming = []
        self.retiring = []
        self.rolling = RollingReload(self, reload_source, emit, clock.now)
        self._cfg_stale = False
        self._nginx_error = None
        self._wake = asyncio.Event()

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """What a signal does: enqueue; the loop decides, between two steps, what stopping means."""
        self.queue.put_nowait(Signalled(signum))

    def request_reload(self, source: str = "request") -> None:
        """What SIGHUP does: enqueue; the loop starts the reload, or queues it behind the running one."""
        self.queue.put_nowait(ReloadRequested(source))

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> int:
        """Start everything, supervise until asked to stop, then drain and stop; returns an exit code."""
        loop = asyncio.get_running_loop()
        for sig in self.signals:
            loop.add_signal_handler(sig, self.request_stop, sig)
        try:
            self._background = [
                asyncio.create_task(self._ticker()),
                asyncio.create_task(self._nginx_loop()),
                asyncio.create_task(self._rotate_logs()),
            ]
            self._tick()  # launches every replica
            while not self.stopping:
                self._handle(await self.queue.get())
                while not self.queue.empty():  # everything already there, then one tick
                    self._handle(self.queue.get_nowait())
                self._tick()
                self._write_state()
            return self.exit_code
        finally:
            # Handlers stay during shutdown: a second Ctrl-C must not orphan replicas mid-drain.
            await self._shutdown()
            for sig in self.signals:
                loop.remove_signal_handler(sig)

    async def _ticker(self) -> None:
        while True:
            await self.clock.sleep(self.sup.tick_s)
            self.queue.put_nowait(TickDue())

    async def _rotate_logs(self) -> None:
        await logrotate.rotate_forever(self._log_files, lambda: self.cfg.logs, self.clock.sleep, self.emit)

    def _log_files(self) -> list[logrotate.LogFile]:
        """Nginx's logs, and every replica's (those a reload started since the last check too)."""
        return self.nginx.logs() + logrotate.files_in(self.run_dir / "logs")

    def _handle(self, item: Item) -> None:
        if isinstance(item, Signalled) and item.signum == signal.SIGHUP:
            self.rolling.request("SIGHUP")
        elif isinstance(item, ReloadRequested):
            self.rolling.request(item.source)
        elif isinstance(item, Signalled):
            self.emit("signal", signal=signal.Signals(item.signum).name)
            self.stopping = True
        elif isinstance(item, NginxFailed):
            self.emit("nginx_failed", error=item.error)
            self.stopping, self.exit_code = True, 1
        elif isinstance(item, Seen):
            self._seen(item)

    def _seen(self, item: Seen) -> None:
        replica = item.replica
        if item.generation != replica.generation:
            self._stale(replica, item)
            return
        if isinstance(item.obs, health.Exited):
            if item.pid is not None:  # None: the spawn failed, and replica_spawn_failed said so
                code = item.obs.returncode
                retired = {"retired": True} if replica.retiring else {}
                self.emit("replica_exited", **self._tag(replica), pid=item.pid, returncode=code, **retired)
            replica.proc = None
        if replica.retiring:  # its end was asked for: nothing to decide
            if replica.proc is None and replica in self.retiring:
                self.retiring.remove(replica)
            self._wake.set()
            return
        if isinstance(item.obs, health.Probe) and item.latency_ms is not None:
            replica.last_probe_ms = item.latency_ms
        self._apply(replica, item.obs)

    def _stale(self, replica: Replica, item: Seen) -> None:
        """An observation of an earlier launch: only an abandoned process finally exiting is news."""
        if isinstance(item.obs, health.Exited) and item.pid is not None:
            gone = [a for a in self.abandoned if a.proc is not None and a.proc.pid == item.pid]
            if gone:
                self.abandoned.remove(gone[0])
                self.emit(
                    "abandoned_exited",
                    **self._tag(replica),
                    pid=item.pid,
                    returncode=item.obs.returncode,
                )

    def _tick(self) -> None:
        if self.stopping:
            return
        now = self.clock.now()
        for replica in self._members():
            self._apply(replica, health.Tick(now))

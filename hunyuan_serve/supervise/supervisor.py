"""The one supervision loop: signals, observations and the clock in, the parts told what to do.

The parts it holds, each owning its fields: the replica set (replica_set.py: health.step applied,
processes launched and probed), the edge task (edge_task.py: edge/driver.py's EdgeDriver kept on the
latest routing; `admitted`/`evicted` once Nginx has taken a config), the rolling reload (rolling.py:
SIGHUP, `hunyuan-serve reload`, one replica at a time through the replica set) and the state file
(state_file.py). They talk through the queue (whatever the loop must decide: signals, ticks,
observations, Nginx's failure), the `reroute` event (the routing changed: the edge renders again) and
`changes` (what a waiting step re-checks on).
"""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hunyuan_serve import logrotate
from hunyuan_serve.config import ServeConfig, config_to_yaml
from hunyuan_serve.edge.kept_tls import KeptPair
from hunyuan_serve.run.plan import ReplicaPlan
from hunyuan_serve.run.seams import Clock, NginxControl, Prober, Runner
from hunyuan_serve.run.state import write_text_atomic
from hunyuan_serve.supervise import reload
from hunyuan_serve.supervise.changes import Changes
from hunyuan_serve.supervise.edge_task import EdgeTask
from hunyuan_serve.supervise.items import Item, NginxFailed, ReloadRequested, Seen, Signalled, TickDue
from hunyuan_serve.supervise.replica_set import ReplicaSet
from hunyuan_serve.supervise.rolling import RollingReload
from hunyuan_serve.supervise.state_file import StateFile

Emit = Callable[..., None]


class Supervisor:
    """Runs the replicas and Nginx until a signal (or `request_stop`) asks it to stop; see `run`."""

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
        kept_tls: KeptPair | None = None,
    ) -> None:
        self.cfg, self.clock, self.emit, self.run_dir = cfg, clock, emit, run_dir
        self.signals = tuple(signals)
        self.queue: asyncio.Queue[Item] = asyncio.Queue()
        reroute, changes = asyncio.Event(), Changes(clock)
        self.replicas = ReplicaSet(
            plans,
            cfg.supervisor,
            runner=runner,
            prober=prober,
            clock=clock,
            emit=emit,
            rand=rand,
            base_env=base_env,
            queue=self.queue,
            reroute=reroute,
            changes=changes,
        )
        self.edge = EdgeTask(
            cfg,
            nginx,
            clock=clock,
            emit=emit,
            run_dir=run_dir,
            web_root=web_root,
            worker_user=worker_user,
            view=self.replicas.routing,
            targets=self.replicas.targets,
            describe=self.replicas.describe,
            routed=self.replicas.routed,
            failed=lambda error: self.queue.put_nowait(NginxFailed(error)),
            reroute=reroute,
            changes=changes,
            kept=kept_tls,
        )
        self.rolling = RollingReload(self.replicas, self, reload_source, emit, clock.now)
        self.state_file = StateFile(run_dir, clock, info)
        self.stopping = False
        self.exit_code = 0
        self._nginx_logs = nginx.logs  # rotated with the replicas' logs
        self._background: list[asyncio.Task[None]] = []

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
            self._background = [asyncio.create_task(self._ticker()), asyncio.create_task(self._rotate_logs())]
            self.edge.start()
            self.replicas.tick()  # launches every replica
            while not self.stopping:
                self._handle(await self.queue.get())
                while not self.queue.empty():  # everything already there, then one tick
                    self._handle(self.queue.get_nowait())
                self.replicas.tick()
                self._write_state()
            return self.exit_code
        finally:
            # Handlers stay during shutdown: a second Ctrl-C must not orphan replicas mid-drain.
            await self._shutdown()
            for sig in self.signals:
                loop.remove_signal_handler(sig)

    def _handle(self, item: Item) -> None:
        if isinstance(item, Signalled) and item.signum == signal.SIGHUP:
            self.rolling.request("SIGHUP")
        elif isinstance(item, ReloadRequested):
            self.rolling.request(item.source)
        elif isinstance(item, Signalled):
            self.emit("signal", signal=signal.Signals(item.signum).name)
            self._stop()
        elif isinstance(item, NginxFailed):
            self.emit("nginx_failed", error=item.error)
            self._stop(exit_code=1)
        elif isinstance(item, Seen):
            self.replicas.seen(item)

    def _stop(self, exit_code: int | None = None) -> None:
        """From now on nothing more is started; the loop ends after this step."""
        self.stopping = True
        self.replicas.halt()
        self.exit_code = self.exit_code if exit_code is None else exit_code

    async def _ticker(self) -> None:
        while True:
            await self.clock.sleep(self.cfg.supervisor.tick_s)
            self.queue.put_nowait(TickDue())

    async def _rotate_logs(self) -> None:
        await logrotate.rotate_forever(self._log_files, lambda: self.cfg.logs, self.clock.sleep, self.emit)

    def _log_files(self) -> list[logrotate.LogFile]:
        """Nginx's logs, and every replica's (those a reload started since the last check too)."""
        return self._nginx_logs() + logrotate.files_in(self.run_dir / "logs")

    def _write_state(self, running: bool = True, phase: str = "running") -> None:
        replicas, incoming = self.replicas.slots(), list(self.replicas.incoming)
        nginx = self.edge.describe()
        self.state_file.write(replicas, incoming, self.rolling.state, nginx, running=running, phase=phase)

    # -- what a rolling reload asks of it (rolling.Host) ---------------------------------------

    async def apply_config(self, prepared: reload.Prepared) -> str | None:
        """Every replica runs the new config: the supervisor and Nginx take it too (None: Nginx did)."""
        self.cfg = prepared.cfg
        self.replicas.configure(prepared.cfg.supervisor)
        self.state_file.note(prepared.info)
        write_text_atomic(self.run_dir / "config.yaml", config_to_yaml(prepared.cfg))
        return await self.edge.take_config(prepared.cfg)

    # -- the end -------------------------------------------------------------------------------

    async def _shutdown(self) -> None:
        """The reload cancelled, the background tasks ended, Nginx drained, then the replicas stopped."""
        self._stop()
        sup = self.cfg.supervisor
        self.emit("stopping", drain_timeout_s=sup.drain_timeout_s)
        self._write_state(running=True, phase="draining")
        await self.rolling.cancel()  # a reload in progress starts nothing more
        for task in self._background:
            task.cancel()
        await self.edge.stop(sup.drain_timeout_s)  # its task is cancelled at once too, then Nginx drained
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.replicas.stop()
        self._write_state(running=False, phase="stopped")
        self.emit("stopped")

"""The one supervision loop: observes exits, probes and the clock, applies health.step, acts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.supervise import health, procs
from hunyuan_serve.supervise.health import Abandon, Health, Kill, Reroute, Start, State
from hunyuan_serve.supervise.nginx import NginxController, NginxError
from hunyuan_serve.supervise.plan import ReplicaPlan
from hunyuan_serve.supervise.probe import HttpProber
from hunyuan_serve.supervise.render import render_nginx
from hunyuan_serve.supervise.routing import Routing, routing_from_states
from hunyuan_serve.supervise.state import STATE_FILE, write_json_atomic

Emit = Callable[..., None]


@dataclass
class Replica:
    """A replica's plan, its pure health state and the live handles that go with it."""

    plan: ReplicaPlan
    health: Health
    generation: int = 0  # bumped per launch, so late observations of an old process are dropped
    proc: asyncio.subprocess.Process | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    last_probe_ms: float | None = None


@dataclass(frozen=True)
class _Signal:
    signum: int


@dataclass(frozen=True)
class _Seen:
    index: int
    generation: int
    obs: health.Observation
    latency_ms: float | None = None


class Supervisor:
    """Runs the replicas and Nginx until a signal asks it to stop; see `run`."""

    def __init__(
        self,
        cfg: ServeConfig,
        plans: list[ReplicaPlan],
        *,
        nginx: NginxController,
        prober: HttpProber,
        emit: Emit,
        run_dir: Path,
        web_root: Path,
        worker_user: str | None,
        base_env: Mapping[str, str],
        info: Mapping[str, Any],
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.cfg = cfg
        self.sup = cfg.supervisor
        self.nginx = nginx
        self.prober = prober
        self.emit = emit
        self.run_dir = run_dir
        self.web_root = web_root
        self.worker_user = worker_user
        self.base_env = dict(base_env)
        self.info = dict(info)
        self.clock = clock
        self.rand = rand
        now = clock()
        self.replicas = [Replica(plan, health.initial(now)) for plan in plans]
        self.queue: asyncio.Queue[_Seen | _Signal] = asyncio.Queue()
        self.config_generation = 0
        self.routed: Routing | None = None  # what Nginx has loaded
        self.stopping = False
        self.started_at = time.time()
        # Killed processes that never exited, with the tasks still waiting for them.
        self.abandoned: list[tuple[asyncio.subprocess.Process, list[asyncio.Task[None]]]] = []

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> int:
        """Start everything, supervise until SIGINT/SIGTERM, then drain and stop; returns an exit code."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            # Handlers only enqueue: the loop decides, between two steps, what stopping means.
            loop.add_signal_handler(sig, self.queue.put_nowait, _Signal(sig))
        try:
            self._tick()  # launches every replica
            await self._start_nginx()
            while not self.stopping:
                await self._wait_and_handle()
                self._tick()
                if self.stopping:
                    break
                await self._sync_nginx()
                self._write_state()
            return 0
        except NginxError as err:
            self.emit("nginx_failed", error=str(err))
            return 1
        finally:
            # Handlers stay during shutdown: a second Ctrl-C must not orphan replicas mid-drain.
            await self._shutdown()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    async def _wait_and_handle(self) -> None:
        try:
            item = await asyncio.wait_for(self.queue.get(), timeout=self.sup.tick_s)
        except asyncio.TimeoutError:
            return
        self._handle(item)
        while not self.queue.empty():  # take everything already there before touching Nginx
            self._handle(self.queue.get_nowait())

    def _handle(self, item: _Seen | _Signal) -> None:
        if isinstance(item, _Signal):
            self.emit("signal", signal=signal.Signals(item.signum).name)
            self.stopping = True
            return
        replica = self.replicas[item.index]
        if item.generation != replica.generation:
            return
        if isinstance(item.obs, health.Exited):
            self.emit(
                "replica_exited",
                replica=replica.plan.name,
                pid=replica.proc.pid if replica.proc else None,
                returncode=item.obs.returncode,
            )
            if replica.proc is not None:
                procs.signal_group(replica.proc.pid, signal.SIGKILL)  # children it left behind
            replica.proc = None
        if isinstance(item.obs, health.Probe) and item.latency_ms is not None:
            replica.last_probe_ms = item.latency_ms
        self._apply(replica, item.obs)

    def _tick(self) -> None:
        if self.stopping:
            return
        now = self.clock()
        for replica in self.replicas:
            self._apply(replica, health.Tick(now))

    def _apply(self, replica: Replica, obs: health.Observation) -> None:
        before = replica.health
        after, actions = health.step(before, obs, self.sup, self.rand())
        replica.health = after
        if after.state is not before.state:
            self.emit(
                "transition",
                replica=replica.plan.name,
                **{"from": before.state.value},
                to=after.state.value,
                reason=after.reason,
                restarts=after.restarts,
            )
        if not after.state.probed:
            self._cancel_probe(replica)
        for action in actions:
            if isinstance(action, Start) and not self.stopping:
                self._launch(replica)
            elif isinstance(action, Kill) and replica.proc is not None:
                self.emit(
                    "replica_killed", replica=replica.plan.name, pid=replica.proc.pid, reason=action.reason
                )
                procs.kill_now(replica.proc)
            elif isinstance(action, Abandon) and replica.proc is not None:
                self.emit("replica_abandoned", replica=replica.plan.name, pid=replica.proc.pid)
                self.abandoned.append((replica.proc, replica.tasks))
                replica.proc, replica.tasks = None, []
            elif isinstance(action, Reroute):
                pass  # _sync_nginx compares the routing derived from states with what Nginx has

    # -- processes -----------------------------------------------------------------------------

    def _launch(self, replica: Replica) -> None:
        replica.generation += 1
        self._cancel_probe(replica)
        replica.tasks = [asyncio.create_task(self._run_replica(replica, replica.generation))]

    async def _run_replica(self, replica: Replica, generation: int) -> None:
        plan = replica.plan
        env = {**self.base_env, **dict(plan.env)}
        try:
            proc = await procs.spawn(plan.argv, env, plan.log_path, plan.cpus)
        except OSError as err:
            self.emit("replica_spawn_failed", replica=plan.name, error=str(err))
            self.queue.put_nowait(_Seen(plan.index, generation, health.Exited(self.clock(), None)))
            return
        if generation != replica.generation or self.stopping:
            procs.kill_now(proc)
            await proc.wait()
            return
        replica.proc = proc
        self.emit("replica_started", replica=plan.name, pid=proc.pid, port=plan.port, device=plan.device)
        replica.tasks.append(asyncio.create_task(self._probe_loop(replica, generation)))
        returncode = await proc.wait()
        self.queue.put_nowait(_Seen(plan.index, generation, health.Exited(self.clock(), returncode)))

    async def _probe_loop(self, replica: Replica, generation: int) -> None:
        count = 0
        while True:
            count += 1
            deep = self.sup.deep_probe_every > 0 and count % self.sup.deep_probe_every == 0
            deep = deep and replica.health.state is State.READY
            result = await self.prober.probe(replica.plan.addr, deep=deep)
            obs = health.Probe(self.clock(), result.ok, result.detail)
            self.queue.put_nowait(_Seen(replica.plan.index, generation, obs, result.latency_ms))
            await asyncio.sleep(self.sup.probe_interval_s)

    def _cancel_probe(self, replica: Replica) -> None:
        # tasks[0] waits for the process; the probe loop, when running, is tasks[1].
        for task in replica.tasks[1:]:
            task.cancel()
        del replica.tasks[1:]

    # -- nginx ---------------------------------------------------------------------------------

    def routing(self) -> Routing:
        return routing_from_states([(r.plan.addr, r.health.state) for r in self.replicas])

    def _render(self, routing: Routing) -> str:
        return render_nginx(
            self.cfg,
            routing,
            prefix=self.nginx.prefix,
            web_root=self.web_root,
            worker_user=self.worker_user,
            generation=self.config_generation,
        )

    async def _start_nginx(self) -> None:
        routing = self.routing()
        self.config_generation += 1
        pid = await self.nginx.start(self._render(routing), self.run_dir / "logs" / "nginx.log")
        self.routed = routing
        self.emit(
            "nginx_started",
            pid=pid,
            port=self.cfg.nginx.port,
            ready=routing.ready,
            config=self.config_generation,
        )

    async def _sync_nginx(self) -> None:
        routing = self.routing()
        if self.nginx.proc is not None and self.nginx.proc.returncode is not None:
            self.emit("nginx_exited", returncode=self.nginx.proc.returncode)
            await self._start_nginx()
            return
        if routing == self.routed or self.routed is None:
            return
        self.config_generation += 1
        try:
            timing = await self.nginx.reload(self._render(routing), self.config_generation)
        except NginxError as err:
            # The running Nginx keeps its last good config; say why and try again on the next change.
            self.emit("nginx_reload_failed", error=str(err), config=self.config_generation)
            return
        old, self.routed = self.routed, routing
        self.emit("nginx_reloaded", ready=routing.ready, config=self.config_generation, **timing)
        for replica, was, now in zip(self.replicas, old.servers, routing.servers, strict=True):
            if was.down and not now.down:
                self.emit(
                    "admitted", replica=replica.plan.name, pid=replica.proc.pid if replica.proc else None
                )
            elif now.down and not was.down:
                self.emit(
                    "evicted",
                    replica=replica.plan.name,
                    state=replica.health.state.value,
                    reason=replica.health.reason,
                )

    # -- shutdown and state ----------------------------------------------------------------------

    async def _shutdown(self) -> None:
        self.stopping = True
        self.emit("stopping", drain_timeout_s=self.sup.drain_timeout_s)
        self._write_state(running=True, phase="draining")
        await self.nginx.stop(self.sup.drain_timeout_s)
        self.emit("nginx_stopped")
        for replica in self.replicas:
            for task in replica.tasks:
                task.cancel()
        live = [r.proc for r in self.replicas if r.proc is not None]
        await asyncio.gather(*(procs.stop(p, signal.SIGTERM, self.sup.kill_timeout_s) for p in live))
        for proc, tasks in self.abandoned:
            procs.kill_now(proc)  # once more; waiting for them is what could not be done
            for task in tasks:
                task.cancel()
        for replica in self.replicas:
            replica.proc = None
        with contextlib.suppress(Exception):
            await self.prober.aclose()
        self._write_state(running=False, phase="stopped")
        self.emit("stopped")

    def _write_state(self, running: bool = True, phase: str = "running") -> None:
        replicas = []
        for r in self.replicas:
            replicas.append(
                {
                    "name": r.plan.name,
                    "device": r.plan.device,
                    "port": r.plan.port,
                    "pid": r.proc.pid if r.proc is not None else None,
                    "state": r.health.state.value,
                    "restarts": r.health.restarts,
                    "reason": r.health.reason,
                    "since_s": round(self.clock() - r.health.since, 3),
                    "last_probe_ms": None if r.last_probe_ms is None else round(r.last_probe_ms, 1),
                    "log": str(r.plan.log_path),
                }
            )
        state = {
            "pid": os.getpid(),
            "running": running,
            "phase": phase,
            "started_at": self.started_at,
            "updated_at": time.time(),
            "run_dir": str(self.run_dir),
            **self.info,
            "replicas": replicas,
            "nginx": {
                "port": self.cfg.nginx.port,
                "listen": self.cfg.nginx.listen,
                "ready": self.routed.ready if self.routed else 0,
                **self.nginx.describe(),
            },
        }
        write_json_atomic(self.run_dir / STATE_FILE, state)

"""The one supervision loop: observes exits, probes and the clock, applies health.step, acts.

Facts and where they come from: `transition` events are the replicas' health states (from `_apply`);
`admitted`/`evicted` say what Nginx routes to, emitted only once Nginx has taken a config (`_routed`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.supervise import health
from hunyuan_serve.supervise.health import Abandon, Health, Kill, Reroute, Start, State
from hunyuan_serve.supervise.nginx import NginxError
from hunyuan_serve.supervise.plan import ReplicaPlan
from hunyuan_serve.supervise.render import environment, render_nginx
from hunyuan_serve.supervise.routing import Routing, UpstreamServer, routing_from_states
from hunyuan_serve.supervise.seams import Clock, NginxControl, Prober, Proc, Runner
from hunyuan_serve.supervise.state import STATE_FILE, write_json_atomic
from hunyuan_serve.supervise.targets import write_targets

Emit = Callable[..., None]


@dataclass
class Replica:
    """A replica's plan, its pure health state and the live handles that go with it."""

    plan: ReplicaPlan
    health: Health
    generation: int = 0  # bumped per launch, so late observations of an old process are dropped
    proc: Proc | None = None  # None until the spawn lands, and again once it has exited
    waiter: asyncio.Task[None] | None = None  # spawns the process, then waits for its exit
    prober: asyncio.Task[None] | None = None  # the probe loop, while the state is probed
    kill_pending: str | None = None  # a Kill that came while the spawn was still in progress
    last_probe_ms: float | None = None


@dataclass(frozen=True)
class Abandoned:
    """A killed process that did not exit, with the task still waiting for it."""

    replica: str
    proc: Proc | None
    waiter: asyncio.Task[None] | None


@dataclass(frozen=True)
class _Signal:
    signum: int


@dataclass(frozen=True)
class _Tick:
    pass


@dataclass(frozen=True)
class _NginxFailed:
    error: str


@dataclass(frozen=True)
class _Seen:
    index: int
    generation: int
    obs: health.Observation
    latency_ms: float | None = None
    pid: int | None = None


_Item = _Seen | _Signal | _Tick | _NginxFailed


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
        signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM),
    ) -> None:
        self.cfg, self.sup = cfg, cfg.supervisor
        self.runner, self.prober, self.nginx, self.clock = runner, prober, nginx, clock
        self.emit = emit
        self.run_dir, self.web_root, self.worker_user = run_dir, web_root, worker_user
        self.base_env, self.info = dict(base_env), dict(info)
        self.rand = rand
        self.signals = tuple(signals)
        self.replicas = [Replica(plan, health.initial(clock.now())) for plan in plans]
        self.queue: asyncio.Queue[_Item] = asyncio.Queue()
        self.reroute = asyncio.Event()  # set by Reroute actions: wakes the Nginx task
        self.templates = environment()  # loaded once: compiling the template took ~40 ms per reload
        self.config_generation = 0
        self.routed: Routing | None = None  # what Nginx has loaded
        self.stopping = False
        self.exit_code = 0
        self.started_at = time.time()
        self.abandoned: list[Abandoned] = []
        self._background: list[asyncio.Task[None]] = []
        self._nginx_exit: asyncio.Task[int | None] | None = None  # ends when the Nginx master exits

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """What a signal does: enqueue; the loop decides, between two steps, what stopping means."""
        self.queue.put_nowait(_Signal(signum))

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> int:
        """Start everything, supervise until asked to stop, then drain and stop; returns an exit code."""
        loop = asyncio.get_running_loop()
        for sig in self.signals:
            loop.add_signal_handler(sig, self.request_stop, sig)
        try:
            self._background = [asyncio.create_task(self._ticker()), asyncio.create_task(self._nginx_loop())]
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
            self.queue.put_nowait(_Tick())

    def _handle(self, item: _Item) -> None:
        if isinstance(item, _Signal):
            self.emit("signal", signal=signal.Signals(item.signum).name)
            self.stopping = True
        elif isinstance(item, _NginxFailed):
            self.emit("nginx_failed", error=item.error)
            self.stopping, self.exit_code = True, 1
        elif isinstance(item, _Seen):
            self._seen(item)

    def _seen(self, item: _Seen) -> None:
        replica = self.replicas[item.index]
        if item.generation != replica.generation:
            self._stale(replica, item)
            return
        if isinstance(item.obs, health.Exited):
            if item.pid is not None:  # None: the spawn failed, and replica_spawn_failed said so
                name, code = replica.plan.name, item.obs.returncode
                self.emit("replica_exited", replica=name, pid=item.pid, returncode=code)
            replica.proc = None
        if isinstance(item.obs, health.Probe) and item.latency_ms is not None:
            replica.last_probe_ms = item.latency_ms
        self._apply(replica, item.obs)

    def _stale(self, replica: Replica, item: _Seen) -> None:
        """An observation of an earlier launch: only an abandoned process finally exiting is news."""
        if isinstance(item.obs, health.Exited) and item.pid is not None:
            gone = [a for a in self.abandoned if a.proc is not None and a.proc.pid == item.pid]
            if gone:
                self.abandoned.remove(gone[0])
                self.emit(
                    "abandoned_exited",
                    replica=replica.plan.name,
                    pid=item.pid,
                    returncode=item.obs.returncode,
                )

    def _tick(self) -> None:
        if self.stopping:
            return
        now = self.clock.now()
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
            self._cancel_prober(replica)
        for action in actions:
            self._act(replica, action)

    def _act(self, replica: Replica, action: health.Action) -> None:
        name = replica.plan.name
        if isinstance(action, Start) and not self.stopping:
            self._launch(replica)
        elif isinstance(action, Kill) and replica.proc is not None:
            self.emit("replica_killed", replica=name, pid=replica.proc.pid, reason=action.reason)
            self.runner.kill(replica.proc)
        elif isinstance(action, Kill):
            # The spawn has not landed yet (a slow start, a before_spawn wait): kill it when it does.
            replica.kill_pending = action.reason
            self.emit("replica_kill_pending", replica=name, reason=action.reason)
        elif isinstance(action, Abandon):
            pid = replica.proc.pid if replica.proc is not None else None
            self.emit("replica_abandoned", replica=name, pid=pid, reason=action.reason)
            self.abandoned.append(Abandoned(name, replica.proc, replica.waiter))
            replica.proc, replica.waiter = None, None
        elif isinstance(action, Reroute):
            self.reroute.set()

    # -- processes -----------------------------------------------------------------------------

    def _launch(self, replica: Replica) -> None:
        replica.generation += 1
        replica.kill_pending = None
        self._cancel_prober(replica)
        replica.waiter = asyncio.create_task(self._run_replica(replica, replica.generation))

    async def _run_replica(self, replica: Replica, generation: int) -> None:
        plan = replica.plan
        try:
            proc = await self.runner.spawn(plan, {**self.base_env, **dict(plan.env)})
        except Exception as err:  # whatever a before_spawn hook raises is a failed start too
            self.emit("replica_spawn_failed", replica=plan.name, error=str(err) or type(err).__name__)
            self.queue.put_nowait(_Seen(plan.index, generation, health.Exited(self.clock.now(), None)))
            return
        if generation != replica.generation or self.stopping:
            # Abandoned, or `up` is stopping, while the spawn was in progress: nobody's process.
            self.runner.kill(proc)
            await self.runner.wait(proc)
            return
        replica.proc = proc
        self.emit("replica_started", replica=plan.name, pid=proc.pid, port=plan.port, device=plan.device)
        if replica.kill_pending is not None:
            self.emit("replica_killed", replica=plan.name, pid=proc.pid, reason=replica.kill_pending)
            self.runner.kill(proc)
        else:
            replica.prober = asyncio.create_task(self._probe_loop(replica, generation))
        returncode = await self.runner.wait(proc)
        exited = health.Exited(self.clock.now(), returncode)
        self.queue.put_nowait(_Seen(plan.index, generation, exited, pid=proc.pid))

    async def _probe_loop(self, replica: Replica, generation: int) -> None:
        count = 0
        while True:
            count += 1
            deep = self.sup.deep_probe_every > 0 and count % self.sup.deep_probe_every == 0
            deep = deep and replica.health.state is State.READY
            result = await self.prober.probe(replica.plan.addr, deep=deep)
            obs = health.Probe(self.clock.now(), result.ok, result.detail)
            self.queue.put_nowait(_Seen(replica.plan.index, generation, obs, result.latency_ms))
            await self.clock.sleep(self.sup.probe_interval_s)

    def _cancel_prober(self, replica: Replica) -> None:
        if replica.prober is not None:
            replica.prober.cancel()
            replica.prober = None

    # -- nginx: its own task, so a slow or refused reload never holds up observations -------------

    def routing(self) -> Routing:
        members = [(r.plan.addr, r.health.state) for r in self.replicas]
        return routing_from_states(members, [r.plan.name for r in self.replicas])

    def _render(self, routing: Routing) -> str:
        return render_nginx(
            self.cfg,
            routing,
            prefix=self.nginx.prefix,
            web_root=self.web_root,
            worker_user=self.worker_user,
            generation=self.config_generation,
            env=self.templates,
        )

    async def _nginx_loop(self) -> None:
        """Start Nginx; then apply the latest routing when woken, and start Nginx again if it exits."""
        try:
            exit_task = self._nginx_exit = await self._start_nginx()
            failed = False
            while True:
                await self._nginx_job(exit_task, retry=failed)
                if exit_task.done():
                    self.emit("nginx_exited", returncode=exit_task.result())
                    exit_task = self._nginx_exit = await self._start_nginx()
                    continue
                self.reroute.clear()  # what changed before this point is in the routing read now
                failed = not await self._reload_nginx()
        except NginxError as err:
            self.queue.put_nowait(_NginxFailed(str(err)))

    async def _nginx_job(self, exit_task: asyncio.Task[int | None], retry: bool) -> None:
        """Wait for a Reroute, Nginx's exit, or (retry: after a failed reload) reload_retry_s."""
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self.reroute.wait())}
        if retry:
            waits.add(asyncio.ensure_future(self.clock.sleep(self.cfg.nginx.reload_retry_s)))
        try:
            await asyncio.wait({*waits, exit_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def _start_nginx(self) -> asyncio.Task[int | None]:
        """Start Nginx on the current routing; returns the task that ends when it exits."""
        routing = self.routing()
        self.config_generation += 1
        pid = await self.nginx.start(self._render(routing), self.run_dir / "logs" / "nginx.log")
        self.emit(
            "nginx_started",
            pid=pid,
            port=self.cfg.nginx.port,
            ready=routing.ready,
            config=self.config_generation,
        )
        self._routed(routing)
        return asyncio.create_task(self.nginx.wait())

    async def _reload_nginx(self) -> bool:
        """Reload to the current routing if Nginx has another; False when the reload failed."""
        routing = self.routing()
        if routing == self.routed:
            return True
        self.config_generation += 1
        try:
            timing = await self.nginx.reload(self._render(routing), self.config_generation)
        except NginxError as err:
            # The running Nginx keeps its last good config; say why.
            self.emit(
                "nginx_reload_failed", error=str(err), config=self.config_generation, ready=routing.ready
            )
            return False
        self.emit("nginx_reloaded", ready=routing.ready, config=self.config_generation, **timing)
        self._routed(routing)
        return True

    def _routed(self, routing: Routing) -> None:
        """Nginx now routes by `routing`: the one place admitted and evicted events come from."""
        old = self.routed or Routing(tuple(UpstreamServer(s.addr, True) for s in routing.servers))
        self.routed = routing
        names = [(r.plan.name, r.plan.device) for r in self.replicas]
        write_targets(self.run_dir, routing, names, self.cfg.nginx.status_port)  # what Prometheus scrapes
        for replica, was, now in zip(self.replicas, old.servers, routing.servers, strict=True):
            name = replica.plan.name
            if was.down and not now.down:
                self.emit("admitted", replica=name, pid=replica.proc.pid if replica.proc else None)
            elif now.down and not was.down:
                self.emit(
                    "evicted", replica=name, state=replica.health.state.value, reason=replica.health.reason
                )

    # -- shutdown and state ----------------------------------------------------------------------

    async def _shutdown(self) -> None:
        self.stopping = True
        self.emit("stopping", drain_timeout_s=self.sup.drain_timeout_s)
        self._write_state(running=True, phase="draining")
        for task in self._background:  # the Nginx task first: it would start a stopped Nginx again
            task.cancel()
        if self._nginx_exit is not None:
            self._nginx_exit.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.nginx.stop(self.sup.drain_timeout_s)
        self.emit("nginx_stopped")
        await self._stop_replicas()
        with contextlib.suppress(Exception):
            await self.prober.aclose()
        self._write_state(running=False, phase="stopped")
        self.emit("stopped")

    async def _stop_replicas(self) -> None:
        tasks: list[asyncio.Task[None]] = []
        for replica in self.replicas:
            self._cancel_prober(replica)
            if replica.proc is None and replica.waiter is not None:
                replica.waiter.cancel()  # a spawn in progress (cancelling it kills what it started)
        live = [r.proc for r in self.replicas if r.proc is not None]
        await asyncio.gather(*(self.runner.stop(p, self.sup.kill_timeout_s) for p in live))
        for gone in self.abandoned:
            if gone.proc is not None:
                self.runner.kill(gone.proc)  # once more; waiting for them is what could not be done
            tasks.extend([gone.waiter] if gone.waiter is not None else [])
        for replica in self.replicas:
            tasks.extend([replica.waiter] if replica.waiter is not None else [])
            replica.proc = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _replica_state(self, r: Replica) -> dict[str, Any]:
        return {
            "name": r.plan.name,
            "device": r.plan.device,
            "addr": r.plan.addr,
            "port": r.plan.port,
            "pid": r.proc.pid if r.proc is not None else None,
            "state": r.health.state.value,
            "restarts": r.health.restarts,
            "reason": r.health.reason,
            "since_s": round(self.clock.now() - r.health.since, 3),
            "last_probe_ms": None if r.last_probe_ms is None else round(r.last_probe_ms, 1),
            "log": str(r.plan.log_path),
        }

    def _write_state(self, running: bool = True, phase: str = "running") -> None:
        state = {
            "pid": os.getpid(),
            "running": running,
            "phase": phase,
            "started_at": self.started_at,
            "updated_at": time.time(),
            "run_dir": str(self.run_dir),
            **self.info,  # model, events file, prompt family...
            "replicas": [self._replica_state(r) for r in self.replicas],
            "nginx": {
                "port": self.cfg.nginx.port,
                "listen": self.cfg.nginx.listen,
                "ready": self.routed.ready if self.routed else 0,
                **self.nginx.describe(),
            },
        }
        write_json_atomic(self.run_dir / STATE_FILE, state)

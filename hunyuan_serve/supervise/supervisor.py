"""The one supervision loop: observes exits, probes and the clock, applies health.step, acts.

Facts and where they come from: `transition` events are the replicas' health states (from `_apply`);
`admitted`/`evicted` say what Nginx routes to, emitted only once Nginx has taken a config (`_routed`);
`reload_*` events tell a rolling reload (SIGHUP, `hunyuan-serve reload`): rolling.RollingReload drives it,
one replica at a time through the same paths (a new Replica started, admitted, then the old one retired).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from hunyuan_serve import logrotate
from hunyuan_serve.config import ServeConfig, config_to_yaml
from hunyuan_serve.fleet import health
from hunyuan_serve.fleet.health import Abandon, Kill, Reroute, Start, State
from hunyuan_serve.fleet.nginx import NginxError
from hunyuan_serve.fleet.plan import ReplicaPlan
from hunyuan_serve.fleet.render import environment, render_nginx
from hunyuan_serve.fleet.routing import Routing, routing_from_states
from hunyuan_serve.fleet.seams import Clock, NginxControl, Prober, Runner
from hunyuan_serve.fleet.state import STATE_FILE, write_json_atomic, write_text_atomic
from hunyuan_serve.fleet.targets import write_targets
from hunyuan_serve.supervise import reload
from hunyuan_serve.supervise.replica import Abandoned, Replica
from hunyuan_serve.supervise.rolling import RollingReload

Emit = Callable[..., None]
_T = TypeVar("_T")


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
class _Reload:
    source: str


@dataclass(frozen=True)
class _Seen:
    replica: Replica
    generation: int
    obs: health.Observation
    latency_ms: float | None = None
    pid: int | None = None


_Item = _Seen | _Signal | _Tick | _NginxFailed | _Reload


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
        self.started_at = self.clock.wall()
        self.abandoned: list[Abandoned] = []
        self._background: list[asyncio.Task[None]] = []
        self._nginx_exit: asyncio.Task[int | None] | None = None  # ends when the Nginx master exits
        self.incoming: list[Replica] = []  # started by a reload, not yet in their slot
        self.retiring: list[Replica] = []  # leaving: evicted, then stopped; never restarted
        self.rolling = RollingReload(self, reload_source, emit, clock.now)
        self._cfg_stale = False  # the config changed: Nginx must re-render even on the same routing
        self._nginx_error: str | None = None  # the last reload Nginx refused, until one is taken
        self._wake = asyncio.Event()  # set when routing or a replica's state changed: reload steps re-check

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
            self.queue.put_nowait(_Tick())

    async def _rotate_logs(self) -> None:
        await logrotate.rotate_forever(self._log_files, lambda: self.cfg.logs, self.clock.sleep, self.emit)

    def _log_files(self) -> list[logrotate.LogFile]:
        """Nginx's logs, and every replica's (those a reload started since the last check too)."""
        return self.nginx.logs() + logrotate.files_in(self.run_dir / "logs")

    def _handle(self, item: _Item) -> None:
        if isinstance(item, _Signal) and item.signum == signal.SIGHUP:
            self.rolling.request("SIGHUP")
        elif isinstance(item, _Reload):
            self.rolling.request(item.source)
        elif isinstance(item, _Signal):
            self.emit("signal", signal=signal.Signals(item.signum).name)
            self.stopping = True
        elif isinstance(item, _NginxFailed):
            self.emit("nginx_failed", error=item.error)
            self.stopping, self.exit_code = True, 1
        elif isinstance(item, _Seen):
            self._seen(item)

    def _seen(self, item: _Seen) -> None:
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

    def _stale(self, replica: Replica, item: _Seen) -> None:
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

    def _apply(self, replica: Replica, obs: health.Observation) -> None:
        before = replica.health
        after, actions = health.step(before, obs, self.sup, self.rand())
        replica.health = after
        if after.state is not before.state:
            self._wake.set()
            self.emit(
                "transition",
                **self._tag(replica),
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
        tag = self._tag(replica)
        if isinstance(action, Start) and not self.stopping:
            self._launch(replica)
        elif isinstance(action, Kill) and replica.proc is not None:
            self.emit("replica_killed", **tag, pid=replica.proc.pid, reason=action.reason)
            self.runner.kill(replica.proc)
        elif isinstance(action, Kill):
            # The spawn has not landed yet (a slow start, a before_spawn wait): kill it when it does.
            replica.kill_pending = action.reason
            self.emit("replica_kill_pending", **tag, reason=action.reason)
        elif isinstance(action, Abandon):
            pid = replica.proc.pid if replica.proc is not None else None
            self.emit("replica_abandoned", **tag, pid=pid, reason=action.reason)
            self.abandoned.append(Abandoned(replica.plan.name, replica.proc, replica.waiter))
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
            self.emit("replica_spawn_failed", **self._tag(replica), error=str(err) or type(err).__name__)
            self.queue.put_nowait(_Seen(replica, generation, health.Exited(self.clock.now(), None)))
            return
        if generation != replica.generation or self.stopping:
            # Abandoned, or `up` is stopping, while the spawn was in progress: nobody's process.
            self.runner.kill(proc)
            await self.runner.wait(proc)
            return
        replica.proc = proc
        self.emit("replica_started", **self._tag(replica), pid=proc.pid, port=plan.port, device=plan.device)
        if replica.kill_pending is not None:
            self.emit("replica_killed", **self._tag(replica), pid=proc.pid, reason=replica.kill_pending)
            self.runner.kill(proc)
        else:
            replica.prober = asyncio.create_task(self._probe_loop(replica, generation))
        returncode = await self.runner.wait(proc)
        exited = health.Exited(self.clock.now(), returncode)
        self.queue.put_nowait(_Seen(replica, generation, exited, pid=proc.pid))

    async def _probe_loop(self, replica: Replica, generation: int) -> None:
        count = 0
        while True:
            count += 1
            deep = self.sup.deep_probe_every > 0 and count % self.sup.deep_probe_every == 0
            deep = deep and replica.health.state is State.READY
            result = await self.prober.probe(replica.plan.addr, deep=deep)
            obs = health.Probe(self.clock.now(), result.ok, result.detail)
            self.queue.put_nowait(_Seen(replica, generation, obs, result.latency_ms))
            await self.clock.sleep(self.sup.probe_interval_s)

    def _cancel_prober(self, replica: Replica) -> None:
        if replica.prober is not None:
            replica.prober.cancel()
            replica.prober = None

    # -- nginx: its own task, so a slow or refused reload never holds up observations -------------

    def _members(self) -> list[Replica]:
        """Who the routing lists and the clock drives: every slot's replica and those a reload starts."""
        return [r for r in (*self.replicas, *self.incoming) if not r.retiring]

    def _known(self) -> list[Replica]:
        """Every replica with a process or a task to answer for, retiring ones included."""
        return list({id(r): r for r in (*self.replicas, *self.incoming, *self.retiring)}.values())

    def _tag(self, replica: Replica) -> dict[str, Any]:
        """How events name a replica (and its pool); one a reload is starting also names the reload."""
        tag = {"replica": replica.plan.name, "pool": replica.plan.pool}
        return tag | ({"reload": replica.incoming} if replica.incoming else {})

    def routing(self) -> Routing:
        members = self._members()
        states = [(r.plan.addr, r.health.state) for r in members]
        return routing_from_states(states, [r.plan.name for r in members], [r.plan.pool for r in members])

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
        except Exception as err:  # a config that cannot even be rendered: say so and stop, never hang
            self.queue.put_nowait(_NginxFailed(f"{type(err).__name__}: {err}"))

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
        if routing == self.routed and not self._cfg_stale:
            return True
        self.config_generation += 1
        try:
            timing = await self.nginx.reload(self._render(routing), self.config_generation)
        except NginxError as err:
            # The running Nginx keeps its last good config; say why.
            self.emit(
                "nginx_reload_failed", error=str(err), config=self.config_generation, ready=routing.ready
            )
            self._nginx_error = str(err)
            self._wake.set()
            return False
        self._cfg_stale, self._nginx_error = False, None
        self.emit("nginx_reloaded", ready=routing.ready, config=self.config_generation, **timing)
        self._routed(routing)
        return True

    def _routed(self, routing: Routing) -> None:
        """Nginx now routes by `routing`: the one place admitted and evicted events come from."""
        was = {s.addr: not s.down for s in self.routed.servers} if self.routed else {}
        now = {s.addr: not s.down for s in routing.servers}
        self.routed = routing
        names = [(r.plan.name, r.plan.device) for r in self._members()]
        write_targets(self.run_dir, routing, names, self.cfg.nginx.status_port)  # what Prometheus scrapes
        for replica in self._known():  # by address: a reload adds servers and takes them away
            addr, tag = replica.plan.addr, self._tag(replica)
            if now.get(addr, False) and not was.get(addr, False):
                self.emit("admitted", **tag, pid=replica.proc.pid if replica.proc else None)
            elif was.get(addr, False) and not now.get(addr, False):
                reason = "replaced by a reload" if replica.retiring else replica.health.reason
                self.emit("evicted", **tag, state=replica.health.state.value, reason=reason)
        self._wake.set()

    # -- rolling reload: rolling.RollingReload drives it through the slot and lifecycle calls below ---

    def request_reload(self, source: str = "request") -> None:
        """What SIGHUP does: enqueue; the loop starts the reload, or queues it behind the running one."""
        self.queue.put_nowait(_Reload(source))

    def slots(self) -> list[Replica]:
        return list(self.replicas)

    def start_incoming(self, plan: ReplicaPlan, rid: int) -> Replica:
        new = Replica(plan, health.initial(self.clock.now()), config=rid, incoming=rid)
        self.incoming.append(new)
        self._apply(new, health.Tick(self.clock.now()))  # starts it now
        return new

    async def admitted(self, new: Replica) -> str | None:
        """None once Nginx routes to the new replica; why not, once it failed (deadline, exit, spawn)."""

        def decided() -> str | None:
            if self._is_routed(new.plan.addr):
                return ""
            failed = new.health.state in (State.RESTARTING, State.EVICTED, State.FAILED)
            return new.health.reason if failed and new.health.launches else None

        return await self._until(decided) or None

    def take_slot(self, index: int, new: Replica) -> None:
        self.incoming.remove(new)
        new.incoming = None
        self.replicas[index] = new

    def restore_slot(self, index: int, old: Replica) -> None:
        self.replicas[index] = Replica(old.plan, health.initial(self.clock.now()), config=old.config)

    async def retire(self, old: Replica) -> None:
        """Out of the routing, then (once Nginx no longer sends it anything) SIGTERM: it drains and exits."""
        old.retiring, old.reload_pid = True, old.proc.pid if old.proc else None
        self.retiring.append(old)
        self._cancel_prober(old)
        self.reroute.set()
        await self._until(lambda: None if self._is_routed(old.plan.addr) else True)
        if old.proc is not None:
            self.emit("replica_draining", **self._tag(old), pid=old.proc.pid, grace_s=self.sup.kill_timeout_s)
            await self.runner.stop(old.proc, self.sup.kill_timeout_s)
        await self._gone(old)

    async def drop(self, new: Replica) -> None:
        """A new replica that failed: out, killed, never restarted."""
        self.incoming.remove(new)
        new.retiring = True
        self.retiring.append(new)
        self._cancel_prober(new)
        self.reroute.set()
        if new.proc is not None and new.health.state is not State.EVICTED:  # EVICTED: killed already
            self.runner.kill(new.proc)
        await self._gone(new)

    async def _gone(self, replica: Replica) -> None:
        """Wait (abandon_after_s at most) until its process has exited; a spawn in progress is cancelled."""
        if replica.proc is None and replica.waiter is not None and not replica.waiter.done():
            replica.waiter.cancel()  # cancelling it kills what it started
        if replica.proc is None:
            if replica in self.retiring:
                self.retiring.remove(replica)
            return
        if (
            await self._until(lambda: True if replica.proc is None else None, self.sup.abandon_after_s)
            is None
        ):
            pid = replica.proc.pid if replica.proc else None
            self.emit("replica_abandoned", **self._tag(replica), pid=pid, reason="did not exit when retired")
            self.abandoned.append(Abandoned(replica.plan.name, replica.proc, replica.waiter))
            replica.proc = None
            self.retiring.remove(replica)

    async def apply_config(self, prepared: reload.Prepared) -> str | None:
        """Every replica runs the new config: the supervisor and Nginx take it too (None: Nginx did)."""
        self.cfg, self.sup = prepared.cfg, prepared.cfg.supervisor
        self.info.update(prepared.info)
        write_text_atomic(self.run_dir / "config.yaml", config_to_yaml(prepared.cfg))
        self._cfg_stale, self._nginx_error = True, None
        self.reroute.set()
        return await self._until(lambda: "" if not self._cfg_stale else self._nginx_error) or None

    def _is_routed(self, addr: str) -> bool:
        """Whether the config Nginx has taken sends traffic to addr."""
        return self.routed is not None and any(s.addr == addr and not s.down for s in self.routed.servers)

    async def _until(self, check: Callable[[], _T | None], timeout_s: float | None = None) -> _T | None:
        """check() once it is not None, re-checked whenever the loop sees a change; None after timeout_s."""
        deadline = None if timeout_s is None else self.clock.now() + timeout_s
        while (found := check()) is None:
            if deadline is not None and self.clock.now() >= deadline:
                return None
            self._wake.clear()
            waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._wake.wait())}
            if deadline is not None:
                waits.add(asyncio.ensure_future(self.clock.sleep(deadline - self.clock.now())))
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
        return found

    # -- shutdown and state ----------------------------------------------------------------------

    async def _shutdown(self) -> None:
        self.stopping = True
        self.emit("stopping", drain_timeout_s=self.sup.drain_timeout_s)
        self._write_state(running=True, phase="draining")
        await self.rolling.cancel()  # a reload in progress starts nothing more
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
        everyone = self._known()
        for replica in everyone:
            self._cancel_prober(replica)
            if replica.proc is None and replica.waiter is not None:
                replica.waiter.cancel()  # a spawn in progress (cancelling it kills what it started)
        live = [r.proc for r in everyone if r.proc is not None]
        await asyncio.gather(*(self.runner.stop(p, self.sup.kill_timeout_s) for p in live))
        for gone in self.abandoned:
            if gone.proc is not None:
                self.runner.kill(gone.proc)  # once more; waiting for them is what could not be done
            tasks.extend([gone.waiter] if gone.waiter is not None else [])
        for replica in everyone:
            tasks.extend([replica.waiter] if replica.waiter is not None else [])
            replica.proc = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _replica_state(self, r: Replica) -> dict[str, Any]:
        return {
            "name": r.plan.name,
            "pool": r.plan.pool,
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
            "config": r.config,
            "retiring": r.retiring,
        }

    def _write_state(self, running: bool = True, phase: str = "running") -> None:
        state = {
            "pid": os.getpid(),
            "running": running,
            "phase": phase,
            "started_at": self.started_at,
            "updated_at": self.clock.wall(),
            "run_dir": str(self.run_dir),
            **self.info,  # model, events file, prompt family...
            "replicas": [self._replica_state(r) for r in self.replicas],
            "incoming": [self._replica_state(r) for r in self.incoming],  # started by a reload
            "reload": self.rolling.state,
            "nginx": {
                "port": self.cfg.nginx.port,
                "listen": self.cfg.nginx.listen,
                "ready": self.routed.ready if self.routed else 0,
                **self.nginx.describe(),
            },
        }
        write_json_atomic(self.run_dir / STATE_FILE, state)

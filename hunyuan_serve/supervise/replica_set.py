"""The replica set: each slot's replica, health.step applied, processes launched, probed and stopped.

A rolling reload drives it through the same paths (rolling.Slots): a new replica started beside the
slots, admitted once Nginx routes to it, then the old one retired.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from hunyuan_serve.config import SupervisorConfig
from hunyuan_serve.edge.driver import Move
from hunyuan_serve.edge.routing import Routing, routing_from_states
from hunyuan_serve.run import health
from hunyuan_serve.run.health import Abandon, Kill, Reroute, Start, State
from hunyuan_serve.run.plan import ReplicaPlan
from hunyuan_serve.run.seams import Clock, Prober, Runner
from hunyuan_serve.supervise.changes import Changes
from hunyuan_serve.supervise.items import Item, Seen
from hunyuan_serve.supervise.replica import Abandoned, Replica

Emit = Callable[..., None]


class ReplicaSet:
    """Observations in (`seen`, `tick`), health states and process starts, kills and probes out.

    Talks to the rest of the supervisor only through what it is given: its observations go on the
    queue, `reroute` asks the edge for a new config, `changes` wakes whoever waits on a state."""

    def __init__(
        self,
        plans: list[ReplicaPlan],
        sup: SupervisorConfig,
        *,
        runner: Runner,
        prober: Prober,
        clock: Clock,
        emit: Emit,
        rand: Callable[[], float],
        base_env: Mapping[str, str],
        queue: asyncio.Queue[Item],
        reroute: asyncio.Event,
        changes: Changes,
    ) -> None:
        self.sup, self.runner, self.prober, self.clock = sup, runner, prober, clock
        self.emit, self.rand, self.base_env = emit, rand, dict(base_env)
        self.queue, self.reroute, self.changes = queue, reroute, changes
        self.replicas = [Replica(plan, health.initial(clock.now())) for plan in plans]
        self.incoming: list[Replica] = []  # started by a reload, not yet in their slot
        self.retiring: list[Replica] = []  # leaving: evicted, then stopped; never restarted
        self.abandoned: list[Abandoned] = []
        self._routed: Routing | None = None  # what Nginx routes, as the edge last said
        self._halted = False  # `up` is stopping: nothing more is started

    def configure(self, sup: SupervisorConfig) -> None:
        """A reload's supervisor settings, for every step from now on."""
        self.sup = sup

    def halt(self) -> None:
        self._halted = True

    # -- readings ------------------------------------------------------------------------------

    def members(self) -> list[Replica]:
        """Who the routing lists and the clock drives: every slot's replica and those a reload starts."""
        return [r for r in (*self.replicas, *self.incoming) if not r.retiring]

    def known(self) -> list[Replica]:
        """Every replica with a process or a task to answer for, retiring ones included."""
        return list({id(r): r for r in (*self.replicas, *self.incoming, *self.retiring)}.values())

    def routing(self) -> Routing:
        members = self.members()
        states = [(r.plan.addr, r.health.state) for r in members]
        return routing_from_states(states, [r.plan.name for r in members], [r.plan.pool for r in members])

    def targets(self) -> list[tuple[str, str]]:
        """Each member's name and device, as the scrape targets list them."""
        return [(r.plan.name, r.plan.device) for r in self.members()]

    def _tag(self, replica: Replica) -> dict[str, Any]:
        """How events name a replica (and its pool); one a reload is starting also names the reload."""
        tag = {"replica": replica.plan.name, "pool": replica.plan.pool}
        return tag | ({"reload": replica.incoming} if replica.incoming else {})

    def _is_routed(self, addr: str) -> bool:
        """Whether the config Nginx has taken sends traffic to addr."""
        return self._routed is not None and any(s.addr == addr and not s.down for s in self._routed.servers)

    def routed(self, routing: Routing) -> None:
        """Nginx now routes by `routing` (the edge says so once a config took)."""
        self._routed = routing

    def describe(self, move: Move) -> dict[str, Any] | None:
        """What the admitted or evicted event of a server says of its replica; None: not one of ours."""
        replica = next((r for r in self.known() if r.plan.addr == move.server.addr), None)
        if replica is None:
            return None
        if move.kind == "admitted":
            return {**self._tag(replica), "pid": replica.proc.pid if replica.proc else None}
        left = replica.left_because or replica.health.reason
        reason = "replaced by a reload" if replica.retiring else left
        return {**self._tag(replica), "state": replica.health.state.value, "reason": reason}

    # -- observations --------------------------------------------------------------------------

    def tick(self) -> None:
        if self._halted:
            return
        now = self.clock.now()
        for replica in self.members():
            self._apply(replica, health.Tick(now))

    def seen(self, item: Seen) -> None:
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
            self.changes.changed()
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

    # -- the lifecycle -------------------------------------------------------------------------

    def _apply(self, replica: Replica, obs: health.Observation) -> None:
        before = replica.health
        after, actions = health.step(before, obs, self.sup, self.rand())
        replica.health = after
        if before.state.routable and not after.state.routable:
            replica.left_because = after.reason
        if after.state is not before.state:
            self.changes.changed()
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
        if isinstance(action, Start) and not self._halted:
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
            self.queue.put_nowait(Seen(replica, generation, health.Exited(self.clock.now(), None)))
            return
        if generation != replica.generation or self._halted:
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
        self.queue.put_nowait(Seen(replica, generation, exited, pid=proc.pid))

    async def _probe_loop(self, replica: Replica, generation: int) -> None:
        count = 0
        while True:
            count += 1
            deep = self.sup.deep_probe_every > 0 and count % self.sup.deep_probe_every == 0
            deep = deep and replica.health.state is State.READY
            result = await self.prober.probe(replica.plan.addr, deep=deep)
            obs = health.Probe(self.clock.now(), result.ok, result.detail)
            self.queue.put_nowait(Seen(replica, generation, obs, result.latency_ms))
            await self.clock.sleep(self.sup.probe_interval_s)

    def _cancel_prober(self, replica: Replica) -> None:
        if replica.prober is not None:
            replica.prober.cancel()
            replica.prober = None

    # -- what a rolling reload drives (rolling.Slots) ------------------------------------------

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

        return await self.changes.until(decided) or None

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
        await self.changes.until(lambda: None if self._is_routed(old.plan.addr) else True)
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
        exited = await self.changes.until(
            lambda: True if replica.proc is None else None, self.sup.abandon_after_s
        )
        if exited is None:
            pid = replica.proc.pid if replica.proc else None
            self.emit("replica_abandoned", **self._tag(replica), pid=pid, reason="did not exit when retired")
            self.abandoned.append(Abandoned(replica.plan.name, replica.proc, replica.waiter))
            replica.proc = None
            self.retiring.remove(replica)

    # -- the end -------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Every replica stopped (kill_timeout_s each, at once), the abandoned killed once more, the
        prober closed."""
        self._halted = True
        tasks: list[asyncio.Task[None]] = []
        everyone = self.known()
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
        with contextlib.suppress(Exception):
            await self.prober.aclose()

"""The per-replica lifecycle actions: health.step applied, its actions done, processes launched and probed."""

from __future__ import annotations

import asyncio

from hunyuan_serve.fleet import health
from hunyuan_serve.fleet.health import Abandon, Kill, Reroute, Start, State
from hunyuan_serve.supervise.core import Seen, SupervisorCore
from hunyuan_serve.supervise.replica import Abandoned, Replica


class Actions(SupervisorCore):
    """Observations in, health states and process starts, kills and probes out."""

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

"""The slot and lifecycle calls a rolling reload drives: start, admit, retire, drop, take the config."""

from __future__ import annotations

from hunyuan_serve.config import config_to_yaml
from hunyuan_serve.fleet import health
from hunyuan_serve.fleet.health import State
from hunyuan_serve.fleet.plan import ReplicaPlan
from hunyuan_serve.fleet.state import write_text_atomic
from hunyuan_serve.supervise import reload
from hunyuan_serve.supervise.actions import Actions
from hunyuan_serve.supervise.replica import Abandoned, Replica


class Slots(Actions):
    """rolling.RollingReload's Stack: one replica at a time through the paths the loop already runs."""

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

"""The rolling reload driver: one reload at a time, one replica at a time, its events and its state."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from hunyuan_serve.config import ConfigError, SecretFileError, ServeConfig, config_to_yaml
from hunyuan_serve.run.plan import ReplicaPlan, pools_of, replica_config
from hunyuan_serve.run.state import write_text_atomic
from hunyuan_serve.supervise import reload
from hunyuan_serve.supervise.replica import Replica

Emit = Callable[..., None]
_Step = dict[str, Any] | str  # a replica replaced (old and new pid, port), or why not


class Refused(Exception):
    """A reload that cannot go ahead; nothing has been touched. exit_code: the `reload` command's
    (2 for a secret file others may read, as every command refusing one exits)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    @classmethod
    def of(cls, err: Exception) -> Refused:
        return cls(str(err) or type(err).__name__, 2 if isinstance(err, SecretFileError) else 1)


class Slots(Protocol):
    """What the driver asks of the replica set: its slots and the replica lifecycle it already runs."""

    def slots(self) -> list[Replica]:
        """The replica in each slot now, by index."""
        ...

    def start_incoming(self, plan: ReplicaPlan, rid: int) -> Replica:
        """A new replica of reload `rid` started beside the slots (not in one yet)."""
        ...

    async def admitted(self, new: Replica) -> str | None:
        """None once Nginx routes to the new replica; why not, once it failed."""
        ...

    async def retire(self, old: Replica) -> None:
        """Out of the routing, drained and stopped; never restarted."""
        ...

    async def drop(self, new: Replica) -> None:
        """A new replica that failed: out, killed, never restarted."""
        ...

    def take_slot(self, index: int, new: Replica) -> None: ...

    def restore_slot(self, index: int, old: Replica) -> None:
        """A fresh replica on old's plan and config in slot `index` (a drain-first step that failed)."""
        ...


class Host(Protocol):
    """What the driver asks of the supervisor: whether it is stopping, its config, and taking a new one."""

    @property
    def stopping(self) -> bool: ...

    @property
    def cfg(self) -> ServeConfig:
        """The config the stack runs (effective: models fetched, families placed)."""
        ...

    async def apply_config(self, prepared: reload.Prepared) -> str | None:
        """The supervisor and Nginx take the new config; None once Nginx has, else why not."""
        ...


class RollingReload:
    """Requests coalesce behind the running reload; each reload reads the config, checks it, then replaces
    every slot's replica in turn (surge or drain-first) and hands the config to the supervisor and Nginx."""

    def __init__(
        self, replicas: Slots, host: Host, source: reload.Source | None, emit: Emit, now: Callable[[], float]
    ) -> None:
        self.replicas, self.host = replicas, host
        self.source, self.emit, self.now = source, emit, now
        self.written = source.initial if source else None  # the running config as written
        self.reloads = 0  # the last reload id given out
        self.state: dict[str, Any] | None = None  # what `status` shows of the last reload
        self._task: asyncio.Task[None] | None = None
        self._pending: int | None = None  # requested during a reload: runs after it
        self._runs: dict[int, dict[str, Any]] = {}  # by slot: what its replica reads, once a reload set it

    def request(self, source: str) -> None:
        """Start a reload now, or queue one behind the running one (every request meanwhile shares it)."""
        if self.host.stopping:
            return
        if self._task is None or self._task.done():
            self.reloads += 1
            self.emit("reload_requested", reload=self.reloads, source=source, queued=False)
            self._task = asyncio.create_task(self._run(self.reloads))
            return
        coalesced = self._pending is not None  # one queued reload reads the config for them all
        if self._pending is None:
            self.reloads += 1
            self._pending = self.reloads
        pending = self._pending
        self.emit(
            "reload_requested",
            reload=pending,
            source=source,
            queued=True,
            coalesced=coalesced,
            behind=pending - 1,
        )

    async def cancel(self) -> None:
        """`up` is stopping: a reload in progress starts nothing more."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self, rid: int | None) -> None:
        while rid is not None and not self.host.stopping:
            try:
                await self._reload(rid)
            except Exception as err:  # a bug must still end the reload, or `reload` waits for nothing
                error = f"{type(err).__name__}: {err}"
                self.emit("reload_failed", reload=rid, replica=None, error=error, replaced=[])
                self.state = {"reload": rid, "outcome": "failed", "replica": None, "error": error}
            rid, self._pending = self._pending, None

    async def _reload(self, rid: int) -> None:
        started = self.now()
        self.state = {"reload": rid, "phase": "reading the config"}
        try:
            prepared, written, replace = await self._check(rid)
        except Refused as err:
            self.emit("reload_refused", reload=rid, error=str(err), exit_code=err.exit_code)
            self.state = {"reload": rid, "outcome": "refused", "error": str(err)}
            return
        replaced: list[dict[str, Any]] = []
        for index in replace:
            plan = prepared.plans[index]
            name = self.replicas.slots()[index].plan.name
            surge = reload.replace_order(written.supervisor.reload_order, [plan]) == "surge"
            done = await (self._surge if surge else self._drain_first)(rid, index, prepared, plan)
            if isinstance(done, str):
                self.emit("reload_failed", reload=rid, replica=name, error=done, replaced=replaced)
                self.state = {"reload": rid, "outcome": "failed", "replica": name, "error": done}
                return
            self._runs[index] = reload.replica_view(prepared.cfg, plan.pool)
            replaced.append(done)
            self.emit("reload_replaced", reload=rid, **done)
        self.written = written
        nginx_error = await self.host.apply_config(prepared)
        wall_s = round(self.now() - started, 3)
        extra = {"nginx_error": nginx_error} if nginx_error else {}
        kept = [p.name for i, p in enumerate(prepared.plans) if i not in replace]
        self.emit("reload_done", reload=rid, replaced=replaced, kept=kept, wall_s=wall_s, **extra)
        self.state = {"reload": rid, "outcome": "done", "replaced": replaced, "kept": kept, "wall_s": wall_s}

    def _running(self, index: int, plan: ReplicaPlan) -> dict[str, Any]:
        """What slot `index`'s replica reads: as the last reload that replaced it set it, else the
        host's config (the one `up` started with, or the last reload's that kept it)."""
        return self._runs.get(index) or reload.replica_view(self.host.cfg, plan.pool)

    def _changed(self, prepared: reload.Prepared) -> list[int]:
        """The slots to replace: those whose replica reads something else under the new config."""
        running = [self._running(i, r.plan) for i, r in enumerate(self.replicas.slots())]
        return reload.to_replace(running, prepared.cfg, prepared.plans)

    async def _check(self, rid: int) -> tuple[reload.Prepared, ServeConfig, list[int]]:
        """The new config read, checked and prepared, with the slots to replace, or Refused saying why;
        touches no replica."""
        if self.source is None or self.written is None:
            raise Refused("this `up` has no config source to read again")
        try:
            written = await self.source.read()
        except ConfigError as err:
            raise Refused.of(err) from None
        slots = self.replicas.slots()
        problems = reload.refusals(self.written, written) + reload.port_refusals(written, len(slots))
        if problems:
            raise Refused("; ".join(problems))
        self.state = {"reload": rid, "phase": "preparing the model"}
        try:
            prepared = await self.source.prepare(written)
        except Exception as err:  # a model that cannot be fetched or read: what prepare raises says why
            raise Refused.of(err) from None
        if [p.name for p in prepared.plans] != [r.plan.name for r in slots]:  # e.g. GPUs gone meanwhile
            names = [p.name for p in prepared.plans]
            raise Refused(f"the new config lays out other replicas ({names}): needs a full restart")
        replace = self._changed(prepared)
        ports = [reload.next_port(written, i, slots[i].plan.port, len(slots)) for i in replace]
        hosts = [prepared.plans[i].host for i in replace]
        busy = [self.source.port_problem(host, port) for host, port in zip(hosts, ports, strict=True)]
        if any(busy):
            raise Refused("; ".join(b for b in busy if b))
        order = reload.replace_order(written.supervisor.reload_order, [prepared.plans[i] for i in replace])
        changed = reload.changed_keys(self.written, written)
        names = [slots[i].plan.name for i in replace]
        self.emit("reload_started", reload=rid, order=order, changed=changed, ports=ports, replace=names)
        return prepared, written, replace

    async def _surge(self, rid: int, index: int, prepared: reload.Prepared, plan: ReplicaPlan) -> _Step:
        """The new replica starts beside the old one; once Nginx routes to it, the old one is retired."""
        old = self.replicas.slots()[index]
        new = self._start(rid, index, prepared, plan)
        error = await self.replicas.admitted(new)
        if error is not None:
            await self.replicas.drop(new)
            return f"{error}; the old process keeps serving"
        self.replicas.take_slot(index, new)
        await self.replicas.retire(old)
        return self._replaced(rid, old, new)

    async def _drain_first(self, rid: int, index: int, prepared: reload.Prepared, plan: ReplicaPlan) -> _Step:
        """The old replica is retired first (its devices freed), then the new one starts in its place."""
        old = self.replicas.slots()[index]
        self.state = {"reload": rid, "phase": f"draining {old.plan.name} before its replacement"}
        await self.replicas.retire(old)
        new = self._start(rid, index, prepared, plan)
        error = await self.replicas.admitted(new)
        if error is not None:
            await self.replicas.drop(new)
            # Its devices are free again: the slot goes back to its previous config.
            self.replicas.restore_slot(index, old)
            return f"{error}; {old.plan.name} starts again on its previous config"
        self.replicas.take_slot(index, new)
        return self._replaced(rid, old, new)

    def _start(self, rid: int, index: int, prepared: reload.Prepared, plan: ReplicaPlan) -> Replica:
        old = self.replicas.slots()[index]
        port = reload.next_port(prepared.cfg, index, old.plan.port, len(self.replicas.slots()))
        plan = reload.incoming_plan(plan, port, rid)
        pool = pools_of(prepared.cfg)[plan.pool]
        write_text_atomic(plan.config_path, config_to_yaml(replica_config(pool, port)))
        phase = f"starting {plan.name} on port {port}"
        self.state = {"reload": rid, "phase": phase, "old_pid": old.proc.pid if old.proc else None}
        return self.replicas.start_incoming(plan, rid)

    def _replaced(self, rid: int, old: Replica, new: Replica) -> dict[str, Any]:
        pair = {
            "replica": new.plan.name,
            "pool": new.plan.pool,
            "old_pid": old.reload_pid,
            "new_pid": new.proc.pid if new.proc else None,
            "old_port": old.plan.port,
            "new_port": new.plan.port,
        }
        self.state = {"reload": rid, "phase": f"{new.plan.name} replaced"}
        return pair

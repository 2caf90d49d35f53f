"""The supervisor's state file (what `status` reads) and its shutdown: drain Nginx, stop every replica."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from hunyuan_serve.fleet.state import STATE_FILE, write_json_atomic
from hunyuan_serve.supervise.core import SupervisorCore
from hunyuan_serve.supervise.replica import Replica


class Reporting(SupervisorCore):
    """The state file, written after every step of the loop and at each phase of the shutdown."""

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


class Shutdown(Reporting):
    """Stopping: the reload cancelled, the background tasks ended, Nginx drained, then the replicas."""

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

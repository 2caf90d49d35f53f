"""The supervisor's Nginx task: render, start and reload on the latest routing; admitted/evicted events."""

from __future__ import annotations

import asyncio
from typing import Any

from hunyuan_serve.edge.controller import NginxError
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import Routing
from hunyuan_serve.edge.targets import write_targets
from hunyuan_serve.supervise.core import NginxFailed, SupervisorCore


class NginxTask(SupervisorCore):
    """Its own task, so a slow or refused reload never holds up observations."""

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
            self.queue.put_nowait(NginxFailed(str(err)))
        except Exception as err:  # a config that cannot even be rendered: say so and stop, never hang
            self.queue.put_nowait(NginxFailed(f"{type(err).__name__}: {err}"))

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

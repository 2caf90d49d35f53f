"""The supervisor's edge: render, start and reload Nginx on the latest routing, in a task of its own.

Its own task, so a slow or refused reload never holds up observations. It asks nothing of the other
parts but what it is given: `view` (the routing wanted now), `targets` (the members' names and
devices), `routed` (told once Nginx has taken a routing), `failed` (Nginx cannot run: stop `up`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.edge.controller import NginxError
from hunyuan_serve.edge.render import environment, render_nginx
from hunyuan_serve.edge.routing import Routing
from hunyuan_serve.edge.targets import write_targets
from hunyuan_serve.run.seams import Clock, NginxControl
from hunyuan_serve.supervise.changes import Changes

Emit = Callable[..., None]


class EdgeTask:
    """Nginx on the latest routing: started, reloaded when `reroute` is set, retried after a refused
    reload, started again when it exits; a config that cannot run at all is `failed`."""

    def __init__(
        self,
        cfg: ServeConfig,
        nginx: NginxControl,
        *,
        clock: Clock,
        emit: Emit,
        run_dir: Path,
        web_root: Path,
        worker_user: str | None,
        view: Callable[[], Routing],
        targets: Callable[[], list[tuple[str, str]]],
        routed: Callable[[Routing], None],
        failed: Callable[[str], None],
        reroute: asyncio.Event,
        changes: Changes,
    ) -> None:
        self.cfg, self.nginx, self.clock, self.emit = cfg, nginx, clock, emit
        self.run_dir, self.web_root, self.worker_user = run_dir, web_root, worker_user
        self.view, self.targets, self.on_routed, self.failed = view, targets, routed, failed
        self.reroute, self.changes = reroute, changes  # reroute: set by whoever changed the routing
        self.templates = environment()  # loaded once: compiling the template took ~40 ms per reload
        self.config_generation = 0
        self.routed: Routing | None = None  # what Nginx has loaded
        self._stale = False  # the config changed: Nginx must re-render even on the same routing
        self._error: str | None = None  # the last reload Nginx refused, until one is taken
        self._exit: asyncio.Task[int | None] | None = None  # ends when the Nginx master exits
        self._task: asyncio.Task[None] | None = None

    # -- what the supervisor asks of it --------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    def describe(self) -> dict[str, Any]:
        """What the state file shows of Nginx."""
        ready = self.routed.ready if self.routed else 0
        return {
            "port": self.cfg.nginx.port,
            "listen": self.cfg.nginx.listen,
            "ready": ready,
            **self.nginx.describe(),
        }

    async def take_config(self, cfg: ServeConfig) -> str | None:
        """Render and reload on a new config; None once Nginx has taken it, else why it refused."""
        self.cfg, self._stale, self._error = cfg, True, None
        self.reroute.set()
        return await self.changes.until(lambda: "" if not self._stale else self._error) or None

    async def stop(self, drain_timeout_s: float) -> None:
        """Its task ended first (it would start a stopped Nginx again), then Nginx drained and stopped."""
        for task in (self._task, self._exit):
            if task is not None:
                task.cancel()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        await self.nginx.stop(drain_timeout_s)
        self.emit("nginx_stopped")

    # -- its task ------------------------------------------------------------------------------

    def render(self, routing: Routing) -> str:
        """The config Nginx gets for `routing`, numbered with the current config generation."""
        return render_nginx(
            self.cfg,
            routing,
            prefix=self.nginx.prefix,
            web_root=self.web_root,
            worker_user=self.worker_user,
            generation=self.config_generation,
            env=self.templates,
        )

    async def _loop(self) -> None:
        """Start Nginx; then apply the latest routing when woken, and start Nginx again if it exits."""
        try:
            exit_task = self._exit = await self._start_nginx()
            failed = False
            while True:
                await self._job(exit_task, retry=failed)
                if exit_task.done():
                    self.emit("nginx_exited", returncode=exit_task.result())
                    exit_task = self._exit = await self._start_nginx()
                    continue
                self.reroute.clear()  # what changed before this point is in the routing read now
                failed = not await self._reload_nginx()
        except NginxError as err:
            self.failed(str(err))
        except Exception as err:  # a config that cannot even be rendered: say so and stop, never hang
            self.failed(f"{type(err).__name__}: {err}")

    async def _job(self, exit_task: asyncio.Task[int | None], retry: bool) -> None:
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
        routing = self.view()
        self.config_generation += 1
        pid = await self.nginx.start(self.render(routing), self.run_dir / "logs" / "nginx.log")
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
        routing = self.view()
        if routing == self.routed and not self._stale:
            return True
        self.config_generation += 1
        try:
            timing = await self.nginx.reload(self.render(routing), self.config_generation)
        except NginxError as err:
            # The running Nginx keeps its last good config; say why.
            self.emit(
                "nginx_reload_failed", error=str(err), config=self.config_generation, ready=routing.ready
            )
            self._error = str(err)
            self.changes.changed()
            return False
        self._stale, self._error = False, None
        self.emit("nginx_reloaded", ready=routing.ready, config=self.config_generation, **timing)
        self._routed(routing)
        return True

    def _routed(self, routing: Routing) -> None:
        """Nginx now routes by `routing`: the scrape targets written, the replica set told."""
        self.routed = routing
        write_targets(
            self.run_dir, routing, self.targets(), self.cfg.nginx.status_port
        )  # what Prometheus scrapes
        self.on_routed(routing)
        self.changes.changed()

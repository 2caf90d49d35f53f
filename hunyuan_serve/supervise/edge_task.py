"""The supervisor's edge task: the edge driver kept on the latest routing, in a task of its own.

Its own task, so a slow or refused reload never holds up observations. The driver (edge/driver.py)
renders, has Nginx test and load each config and emits the nginx_*, admitted and evicted events; this
task decides when: at once on a reroute, after reload_retry_s when Nginx refused one, again when Nginx
exits. It asks nothing of the other parts but what it is given: `view` (the routing wanted now),
`targets` (the members' names and devices), `describe` (what an admitted or evicted event says of a
server), `routed` (told once Nginx has taken a routing), `failed` (Nginx cannot run: stop `up`), and
`kept` (the copies of the front's pair Nginx serves, edge/kept_tls.py; None: the configured files).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.edge.controller import NginxError
from hunyuan_serve.edge.driver import Describe, EdgeDriver, EdgeView
from hunyuan_serve.edge.hold import READY_FILE, ready_file
from hunyuan_serve.edge.kept_tls import KeptPair
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
        describe: Describe,
        routed: Callable[[Routing], None],
        failed: Callable[[str], None],
        reroute: asyncio.Event,
        changes: Changes,
        kept: KeptPair | None = None,
    ) -> None:
        self.cfg, self.nginx, self.clock, self.emit = cfg, nginx, clock, emit
        self.run_dir, self.web_root, self.worker_user = run_dir, web_root, worker_user
        self.view, self.targets, self.on_routed, self.failed = view, targets, routed, failed
        self.reroute, self.changes = reroute, changes  # reroute: set by whoever changed the routing
        self.kept = kept
        self.templates = environment()  # loaded once: compiling the template took ~40 ms per reload
        self.driver = EdgeDriver(
            nginx,
            lambda view, _generation: self.render(view.routing),
            emit,
            clock,
            describe=describe,
            log=run_dir / "logs" / "nginx.log",
            port=cfg.nginx.port,
            retry_s=cfg.nginx.reload_retry_s,
            ready_file=nginx.prefix / READY_FILE,
        )
        self._task: asyncio.Task[None] | None = None

    # -- what the supervisor asks of it --------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    def describe(self) -> dict[str, Any]:
        """What the state file shows of Nginx."""
        routed = self.driver.routed
        return {
            "port": self.cfg.nginx.port,
            "listen": self.cfg.nginx.listen,
            "ready": routed.routing.ready if routed else 0,
            **self.nginx.describe(),
        }

    async def take_config(self, cfg: ServeConfig) -> str | None:
        """Render and reload on a new config; None once Nginx has taken it, else why it refused. The
        front's pair the reload checked (and staged) is served from this reload on."""
        if self.kept is not None:
            self.kept.commit()
        self.cfg, self.driver.stale, self.driver.error = cfg, True, None
        self.reroute.set()
        return await self.changes.until(lambda: "" if not self.driver.stale else self.driver.error) or None

    async def stop(self, drain_timeout_s: float) -> None:
        """Its task ended first (it would start a stopped Nginx again), then Nginx drained and stopped."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.driver.stop_watching()
        await self.nginx.stop(drain_timeout_s)
        self.emit("nginx_stopped")

    # -- its task ------------------------------------------------------------------------------

    def render(self, routing: Routing) -> str:
        """The config Nginx gets for `routing`, numbered with the generation the driver loads it as."""
        cfg = self.cfg
        if self.kept is not None:  # the copies of the last pair accepted, never the configured files
            cfg = cfg.model_copy(update={"nginx": self.kept.served(cfg.nginx)})
        return render_nginx(
            cfg,
            routing,
            prefix=self.nginx.prefix,
            web_root=self.web_root,
            worker_user=self.worker_user,
            generation=self.driver.generation,
            env=self.templates,
            ready_file=ready_file(cfg, self.nginx.prefix),
        )

    async def _loop(self) -> None:
        """Start Nginx; then apply the latest routing when woken, and start Nginx again if it exits."""
        try:
            await self.driver.start(EdgeView(self.view()))
            self._loaded()
            failed = False
            while True:
                await self._job(retry=failed)
                if await self.driver.restart_if_exited(EdgeView(self.view())) is not None:
                    self._loaded()
                    continue
                self.reroute.clear()  # what changed before this point is in the routing read now
                failed = not await self._reload()
        except NginxError as err:
            self.failed(str(err))
        except Exception as err:  # a config that cannot even be rendered: say so and stop, never hang
            self.failed(f"{type(err).__name__}: {err}")

    async def _job(self, retry: bool) -> None:
        """Wait for a Reroute, Nginx's exit, or (retry: after a failed reload) reload_retry_s."""
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self.reroute.wait())}
        if retry:
            waits.add(asyncio.ensure_future(self.clock.sleep(self.cfg.nginx.reload_retry_s)))
        exited = [self.driver.exited] if self.driver.exited is not None else []
        try:
            await asyncio.wait({*waits, *exited}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def _reload(self) -> bool:
        """Reload to the current routing if Nginx has another; False when Nginx refused it. At once, not
        by the driver's `due`: a routing change during a retry wait is tried without waiting it out."""
        view = EdgeView(self.view())
        if view == self.driver.routed and not self.driver.stale:
            return True
        if await self.driver.reload(view) is None:
            self.changes.changed()  # a config being taken waits on the refusal too
            return False
        self._loaded()
        return True

    def _loaded(self) -> None:
        """Nginx now routes by the driver's view: the scrape targets written, the replica set told."""
        routed = self.driver.routed
        if routed is None:  # never after a load that took
            return
        write_targets(self.run_dir, routed.routing, self.targets(), self.cfg.nginx.status_port)
        self.on_routed(routed.routing)
        self.changes.changed()

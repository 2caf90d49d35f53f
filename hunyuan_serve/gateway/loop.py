"""The gateway loop: poll the hosts, probe their replicas, and keep its Nginx on the current routing."""

# One round every gateway.probe_interval_s: the hosts' listings (when discovery_interval_s has passed)
# and the replicas' probes run at once, each bounded by its own timeout; then time passes in the fleet
# and Nginx gets the new routing if it differs from what it has. Signals only enqueue; the loop stops
# between two rounds, or on SIGHUP (`gateway reload`) has Nginx read the front's pair again there.
# Every effect goes through a small protocol, so the unit tests run it on fakes.

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hunyuan_serve import logrotate
from hunyuan_serve.edge.controller import NginxError
from hunyuan_serve.edge.driver import EdgeDriver, EdgeView, Move
from hunyuan_serve.edge.kept_tls import KEPT_TLS_DIR, KeptPair
from hunyuan_serve.edge.render import environment, render_nginx
from hunyuan_serve.gateway.discovery import Discovery, DiscoveryError
from hunyuan_serve.gateway.hosts import Event, Fleet, HostListing, HostView
from hunyuan_serve.gateway.inventory import Inventory
from hunyuan_serve.gateway.tls import listing_problem, upstream_tls
from hunyuan_serve.private_files import exposed_problem
from hunyuan_serve.run.seams import Clock, NginxControl, Prober
from hunyuan_serve.run.state import write_json_atomic

STATE_FILE = "gateway.json"
EVENTS_FILE = "gateway-events.jsonl"
Emit = Callable[..., None]


class Gateway:
    """Runs the front until a signal (or `request_stop`) asks it to stop; see `run`."""

    def __init__(
        self,
        inventory: Inventory,
        *,
        discovery: Discovery,
        prober: Prober,
        nginx: NginxControl,
        clock: Clock,
        emit: Emit,
        run_dir: Path,
        web_root: Path,
        worker_user: str | None,
        signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP),
    ) -> None:
        self.inventory, self.gw, self.cfg = inventory, inventory.gateway, inventory.serve_config()
        self.discovery, self.prober, self.nginx, self.clock = discovery, prober, nginx, clock
        self.emit, self.run_dir, self.web_root, self.worker_user = emit, run_dir, web_root, worker_user
        self.signals = tuple(signals)
        self.fleet = Fleet(inventory.hosts, self.gw, clock.now())
        self.queue: asyncio.Queue[int] = asyncio.Queue()
        self.templates = environment()
        self.upstream_tls = upstream_tls(inventory)
        # Nginx serves copies of the last pair accepted (edge/kept_tls.py), read again from these paths.
        self.front, self.front_source = KeptPair(run_dir / KEPT_TLS_DIR), self.cfg.nginx
        self.reloads = 0  # the last reload id given out (SIGHUP)
        self.edge = EdgeDriver(
            nginx,
            self._render,
            emit,
            clock,
            describe=self._describe,
            log=run_dir / "logs" / "nginx.log",
            port=self.cfg.nginx.port,
            retry_s=self.cfg.nginx.reload_retry_s,
        )
        self.next_discovery = clock.now()
        self.rotating: asyncio.Task[None] | None = None
        self.started_at = self.clock.wall()

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """What a signal does: enqueue; the loop stops between two rounds (SIGHUP: reloads there)."""
        self.queue.put_nowait(signum)

    async def run(self) -> int:
        """Discover, start Nginx, then a round per probe interval until asked to stop; an exit code."""
        loop = asyncio.get_running_loop()
        for sig in self.signals:
            loop.add_signal_handler(sig, self.request_stop, sig)
        self.rotating = asyncio.create_task(
            logrotate.rotate_forever(self._log_files, lambda: self.cfg.logs, self.clock.sleep, self.emit)
        )
        try:
            refused = self.front.install(self.front_source)
            if refused is not None:  # the pair changed since the start's check
                self.emit("nginx_failed", error=refused)
                return 1
            self.cfg = self.cfg.model_copy(update={"nginx": self.front.served(self.front_source)})
            await self.step()  # the first listings, so Nginx starts with what is already there
            await self.start_nginx()
            while await self._pause():
                await self.step()
                await self.sync()
            return 0
        except NginxError as err:
            self.emit("nginx_failed", error=str(err))
            return 1
        finally:
            await self._shutdown()
            for sig in self.signals:
                loop.remove_signal_handler(sig)

    def _log_files(self) -> list[logrotate.LogFile]:
        return self.nginx.logs() + logrotate.files_in(self.run_dir / "logs")

    async def _pause(self) -> bool:
        """Sleep a probe interval; False when a signal came (it ends the sleep at once)."""
        sleeper = asyncio.ensure_future(self.clock.sleep(self.gw.probe_interval_s))
        getter = asyncio.ensure_future(self.queue.get())
        try:
            done, _ = await asyncio.wait({sleeper, getter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            getter.cancel()
        if getter in done:
            signum = getter.result()
            if signum == signal.SIGHUP:
                await self.reload_front()
                return True
            self.emit("signal", signal=signal.Signals(signum).name)
            return False
        return True

    async def reload_front(self) -> None:
        """`gateway reload`: the front's pair read again at its paths (a renewal), checked as at start,
        and Nginx reloaded on it; a pair the checks refuse leaves the one served in place."""
        self.reloads += 1
        rid = self.reloads
        self.emit("reload_requested", reload=rid, source="SIGHUP")
        refused = await asyncio.to_thread(self.front.install, self.front_source)
        if refused is not None:
            # A key others may read is refused as every secret file is: `gateway reload` exits 2 on it.
            key = self.front_source.tls_key
            exit_code = 2 if key and exposed_problem(key, "nginx.tls_key") else 1
            self.emit("reload_refused", reload=rid, error=refused, exit_code=exit_code)
            return
        self.edge.stale = True  # the same view loaded again: Nginx reads the pair on a reload
        if await self.edge.reload(self.view()) is None:
            self.emit("reload_failed", reload=rid, error=self.edge.error)
            return
        self.write_state()
        self.emit("reload_done", reload=rid, tls=self.front.summary)

    # -- one round -------------------------------------------------------------------------------

    async def step(self) -> None:
        """Poll the hosts when due and probe the replicas (at once), then let time pass in the fleet."""
        now = self.clock.now()
        due = now >= self.next_discovery
        if due:
            self.next_discovery = now + self.gw.discovery_interval_s
        await asyncio.gather(self._discover() if due else asyncio.sleep(0), self._probe())
        self._record(self.fleet.tick(self.clock.now()))
        self.write_state()

    async def _discover(self) -> None:
        views = list(self.fleet.hosts.values())
        results = await asyncio.gather(*(self._fetch(v.entry.url) for v in views))
        now = self.clock.now()
        for view, result in zip(views, results, strict=True):
            name, secret = view.entry.name, self.inventory.peer_secret_file is not None
            if isinstance(result, HostListing):
                # A listing the TLS rules refuse is not routed, as a host that cannot be polled is not.
                refused = listing_problem(view.entry, result, secret)
                events = (
                    self.fleet.unlisted(name, refused, now)
                    if refused
                    else self.fleet.listed(name, result, now)
                )
            else:
                events = self.fleet.unlisted(name, result, now)
            self._record(events)

    async def _fetch(self, url: str) -> HostListing | str:
        try:
            return await self.discovery.fetch(url)
        except DiscoveryError as err:
            return str(err)

    async def _probe(self) -> None:
        targets = self.fleet.to_probe()
        results = await asyncio.gather(*(self.prober.probe(addr) for _, addr in targets))
        now = self.clock.now()
        for (host, addr), result in zip(targets, results, strict=True):
            self._record(self.fleet.probed(host, addr, result.ok, result.detail, result.latency_ms, now))

    def _record(self, events: list[Event]) -> None:
        for name, fields in events:
            self.emit(name, **fields)

    # -- nginx -----------------------------------------------------------------------------------

    def view(self) -> EdgeView:
        return EdgeView(self.fleet.routing(), self.fleet.front())

    def _render(self, view: EdgeView, generation: int) -> str:
        return render_nginx(
            self.cfg,
            view.routing,
            prefix=self.nginx.prefix,
            web_root=self.web_root,
            worker_user=self.worker_user,
            generation=generation,
            env=self.templates,
            front=view.front,
            upstream_tls=self.upstream_tls,
        )

    async def start_nginx(self) -> None:
        """Start Nginx on the current view; NginxError when it does not come up."""
        await self.edge.start(self.view())
        self.write_state()

    async def sync(self) -> None:
        """Reload Nginx to the current view if it has another; start it again if it exited."""
        if await self.edge.restart_if_exited(self.view()) is not None:
            self.write_state()
            return
        view = self.view()
        if self.edge.due(view) and await self.edge.reload(view) is not None:
            # At once, not at the next round: status (and whoever waits on it) reads what Nginx routes now.
            self.write_state()

    @staticmethod
    def _describe(move: Move) -> dict[str, Any]:
        """A move's event: the replica (host/name) and its address; why, when its host stopped listing it."""
        fields: dict[str, Any] = {"replica": move.server.name, "addr": move.server.addr}
        if move.kind == "unlisted":
            fields["reason"] = "no longer listed by its host"
        return fields

    # -- shutdown and state ----------------------------------------------------------------------

    async def _shutdown(self) -> None:
        self.emit("stopping", drain_timeout_s=self.gw.drain_timeout_s)
        await self.edge.stop_watching()
        if self.rotating is not None:
            self.rotating.cancel()
            await asyncio.gather(self.rotating, return_exceptions=True)
        await self.nginx.stop(self.gw.drain_timeout_s)
        self.emit("nginx_stopped")
        for closing in (self.prober.aclose, self.discovery.aclose):
            with contextlib.suppress(Exception):
                await closing()
        self.write_state(running=False)
        self.emit("stopped")

    def _host_state(self, view: HostView) -> dict[str, Any]:
        now = self.clock.now()
        replicas = [
            {
                "name": r.name,
                "addr": r.addr,
                "state": self.fleet.replica_state(view, r),
                "routed": self.fleet.routed(view, r),
                "ready_on_host": r.host_ready,
                "health": r.health.state.value,
                "reason": r.health.reason,
                "since_s": round(now - r.health.since, 3),
                "last_probe_ms": None if r.last_probe_ms is None else round(r.last_probe_ms, 1),
            }
            for r in view.replicas.values()
        ]
        listing = view.listing
        return {
            "name": view.entry.name,
            "url": view.entry.url,
            "state": view.state,
            "reason": view.reason,
            "since_s": round(now - view.since, 3),
            "model": listing.model if listing else None,
            "config": listing.config if listing else None,
            "replicas": replicas,
        }

    def write_state(self, running: bool = True) -> None:
        routing = self.edge.routed.routing if self.edge.routed else None
        state = {
            "pid": os.getpid(),
            "running": running,
            "started_at": self.started_at,
            "updated_at": self.clock.wall(),
            "run_dir": str(self.run_dir),
            "hosts": [self._host_state(v) for v in self.fleet.hosts.values()],
            "nginx": {
                "listen": self.cfg.nginx.listen,
                "port": self.cfg.nginx.port,
                "ready": routing.ready if routing else 0,
                "replicas": len(routing.servers) if routing else 0,
                "config_generation": self.edge.generation,
                "tls": self.front.summary,
                **self.nginx.describe(),
            },
        }
        write_json_atomic(self.run_dir / STATE_FILE, state)

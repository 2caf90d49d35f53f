"""The one edge driver: render, `nginx -t`, start, reload, retry, and whom each load admits and evicts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hunyuan_serve.edge.controller import NginxError
from hunyuan_serve.edge.hold import ready_table
from hunyuan_serve.edge.layout import GatewayFront
from hunyuan_serve.edge.routing import Routing, UpstreamServer
from hunyuan_serve.run.seams import Clock, NginxControl
from hunyuan_serve.run.state import write_text_atomic


def write_ready(path: Path, routing: Routing) -> None:
    """The file hold.js reads, written whole (a reader never sees half of it); before Nginx's first
    start its prefix may not exist yet."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(ready_table(routing), sort_keys=True))


Emit = Callable[..., None]


@dataclass(frozen=True)
class EdgeView:
    """What one Nginx config is rendered from: the routing, and on a gateway what its front says."""

    routing: Routing
    front: GatewayFront | None = None


@dataclass(frozen=True)
class Move:
    """One server whose place changed between two loaded configs: `admitted` (routable now, not before),
    `evicted` (routable before, listed `down` now) or `unlisted` (routable before, not listed now)."""

    kind: str
    server: UpstreamServer


def moves(before: Routing | None, after: Routing) -> list[Move]:
    """The moves from what Nginx routed to what it routes now, in the new routing's server order, then
    the servers no longer listed. A server is its (name, addr): a reload adds servers and takes them away."""
    was = {(s.name, s.addr): s.down for s in before.servers} if before else {}
    now = {(s.name, s.addr): s for s in after.servers}
    out = []
    for key, server in now.items():
        was_down = was.get(key, True)
        if was_down and not server.down:
            out.append(Move("admitted", server))
        elif server.down and not was_down:
            out.append(Move("evicted", server))
    gone = [s for s in before.servers if (s.name, s.addr) not in now and not s.down] if before else []
    return out + [Move("unlisted", s) for s in gone]


# The config text for a view and the generation it will be loaded as.
Render = Callable[[EdgeView, int], str]
# What a move says in its event (admitted, or evicted for both other kinds); None: say nothing of it.
Describe = Callable[[Move], dict[str, Any] | None]


class EdgeDriver:
    """Keeps one Nginx on the latest view: `start`, then `reload` (each renders the view, has Nginx test
    the config, and loads it), `due` says when a changed view or a retry after a refused reload is
    pending. Every load that took emits its nginx_* event and an admitted or evicted event per move:
    the one place those events come from, for `up` and the gateway alike."""

    def __init__(
        self,
        controller: NginxControl,
        render: Render,
        emit: Emit,
        clock: Clock,
        *,
        describe: Describe,
        log: Path,
        port: int,
        retry_s: float,
        ready_file: Path | None = None,
    ) -> None:
        self.controller, self.render, self.emit, self.clock = controller, render, emit, clock
        self.describe, self.log, self.port, self.retry_s = describe, log, port, retry_s
        # The replicas ready now, for requests held in workers of an older config (edge/hold.py); written
        # before each load, so a held request is sent to a replica as soon as Nginx is told of it.
        self.ready_file = ready_file
        self.generation = 0  # of the last config rendered, loaded or not
        self.routed: EdgeView | None = None  # what Nginx has loaded
        self.stale = False  # the settings changed: re-render even on the same view
        self.error: str | None = None  # the last reload Nginx refused, until one is taken
        self.retry_at = 0.0  # after a refused reload: when `due` allows the next
        self.exited: asyncio.Task[int | None] | None = None  # ends when the Nginx master exits

    async def start(self, view: EdgeView) -> list[Move]:
        """Start Nginx on the view (NginxError when it does not come up); the moves it made."""
        self.generation += 1
        self._write_ready(view)
        pid = await self.controller.start(self.render(view, self.generation), self.log)
        ready = view.routing.ready
        self.emit("nginx_started", pid=pid, port=self.port, ready=ready, config=self.generation)
        self.exited = asyncio.create_task(self.controller.wait())
        return self._loaded(view)

    def due(self, view: EdgeView) -> bool:
        """Whether a reload is pending: the view (or the settings) changed, and no retry wait is running."""
        return (view != self.routed or self.stale) and self.clock.now() >= self.retry_at

    async def reload(self, view: EdgeView) -> list[Move] | None:
        """Reload to the view if Nginx has another (or the settings changed); the moves it made, or None
        when Nginx refused the config (the running one keeps its last good config; say why)."""
        if view == self.routed and not self.stale:
            return []
        self.generation += 1
        ready = view.routing.ready
        self._write_ready(view)
        try:
            timing = await self.controller.reload(self.render(view, self.generation), self.generation)
        except NginxError as err:
            self.emit("nginx_reload_failed", error=str(err), config=self.generation, ready=ready)
            self.error, self.retry_at = str(err), self.clock.now() + self.retry_s
            return None
        self.stale, self.error = False, None
        self.emit("nginx_reloaded", ready=ready, config=self.generation, **timing)
        return self._loaded(view)

    async def restart_if_exited(self, view: EdgeView) -> list[Move] | None:
        """Start Nginx again if it exited (say so first); None while it runs."""
        if self.exited is None or not self.exited.done():
            return None
        self.emit("nginx_exited", returncode=self.exited.result())
        return await self.start(view)

    def _write_ready(self, view: EdgeView) -> None:
        if self.ready_file is not None:
            write_ready(self.ready_file, view.routing)

    def _loaded(self, view: EdgeView) -> list[Move]:
        """Nginx now routes by this view: one event per move, as `describe` tells it."""
        made = moves(self.routed.routing if self.routed else None, view.routing)
        self.routed = view
        for move in made:
            fields = self.describe(move)
            if fields is not None:
                self.emit("admitted" if move.kind == "admitted" else "evicted", **fields)
        return made

    async def stop_watching(self) -> None:
        """Stop waiting on the Nginx master's exit (before stopping it on purpose)."""
        if self.exited is not None:
            self.exited.cancel()
            await asyncio.gather(self.exited, return_exceptions=True)

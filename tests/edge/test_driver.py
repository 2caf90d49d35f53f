"""The edge driver on a fake Nginx and clock: which loads it makes, and which events each one says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hunyuan_serve.edge.driver import EdgeDriver, EdgeView, Move, moves
from hunyuan_serve.edge.routing import Routing, UpstreamServer
from tests.support.fakes import FakeClock, FakeNginx


def routing(*servers: tuple[str, str, bool]) -> Routing:
    """Servers as (name, addr, routable)."""
    return Routing(tuple(UpstreamServer(addr, not up, name) for name, addr, up in servers))


def kinds(made: list[Move] | None) -> list[tuple[str, str]]:
    return [(m.kind, m.server.name) for m in made or []]


def test_moves_follow_the_new_routing_then_the_servers_it_no_longer_lists() -> None:
    before = routing(("a", "h:1", True), ("b", "h:2", False), ("c", "h:3", True), ("d", "h:4", True))
    after = routing(("a", "h:1", False), ("b", "h:2", True), ("c", "h:3", True), ("e", "h:5", True))
    assert kinds(moves(before, after)) == [
        ("evicted", "a"),
        ("admitted", "b"),
        ("admitted", "e"),
        ("unlisted", "d"),
    ]
    assert kinds(moves(None, before)) == [("admitted", "a"), ("admitted", "c"), ("admitted", "d")]
    # Another replica on the same address is another server: the old one leaves, the new one comes.
    renamed = routing(("a2", "h:1", True))
    assert kinds(moves(routing(("a", "h:1", True)), renamed)) == [("admitted", "a2"), ("unlisted", "a")]


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = FakeClock(instant=True)
        self.nginx = FakeNginx(self.clock, tmp_path)
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.driver = EdgeDriver(
            self.nginx,
            lambda view, generation: f"config {generation}: {view.routing.ready} ready\n",
            lambda name, **fields: self.events.append((name, fields)),
            self.clock,
            describe=lambda move: {"replica": move.server.name} if move.server.name != "quiet" else None,
            log=tmp_path / "nginx.log",
            port=8080,
            retry_s=5.0,
        )

    def names(self) -> list[str]:
        return [name for name, _ in self.events]


async def test_a_refused_reload_waits_its_retry_and_a_taken_one_says_its_moves(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    one, both = (
        EdgeView(routing(("a", "h:1", True))),
        EdgeView(routing(("a", "h:1", True), ("b", "h:2", True))),
    )
    assert kinds(await h.driver.start(one)) == [("admitted", "a")]
    assert h.events[0] == ("nginx_started", {"pid": 701, "port": 8080, "ready": 1, "config": 1})
    assert not h.driver.due(one) and h.driver.due(both)
    h.nginx.reject = "bad"
    assert await h.driver.reload(both) is None
    assert h.events[-1][0] == "nginx_reload_failed" and h.driver.error and h.driver.routed == one
    assert not h.driver.due(both)  # the retry wait runs
    h.clock.t += 5.0
    assert h.driver.due(both)
    h.nginx.reject = None
    assert kinds(await h.driver.reload(both)) == [("admitted", "b")]
    assert h.names()[-2:] == ["nginx_reloaded", "admitted"] and h.driver.error is None
    assert h.nginx.configs == ["config 1: 1 ready\n", "config 3: 2 ready\n"]  # generation 2 was refused


async def test_changed_settings_reload_the_same_view_and_a_move_may_go_unsaid(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    view = EdgeView(routing(("quiet", "h:1", True)))
    await h.driver.start(view)
    assert await h.driver.reload(view) == [] and len(h.nginx.configs) == 1  # nothing to load
    h.driver.stale = True
    assert h.driver.due(view) and await h.driver.reload(view) == []
    assert len(h.nginx.configs) == 2 and not h.driver.stale
    assert "admitted" not in h.names()  # describe said nothing of it


async def test_nginx_that_exited_is_started_again_once(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    view = EdgeView(routing(("a", "h:1", True)))
    await h.driver.start(view)
    assert await h.driver.restart_if_exited(view) is None
    h.nginx.exit(1)
    assert h.driver.exited is not None
    await h.driver.exited
    assert kinds(await h.driver.restart_if_exited(view)) == []  # already routed: no move
    assert h.names()[-2:] == ["nginx_exited", "nginx_started"] and h.nginx.starts == 2
    await h.driver.stop_watching()

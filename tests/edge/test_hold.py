"""No replica ready: the real Nginx holds a request (hold.js) until one is, across the reload that admits
it, or answers the 503 once nginx.hold_s is spent; a pool whose replicas are full still refuses at once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.edge.controller import NginxController
from hunyuan_serve.edge.driver import write_ready
from hunyuan_serve.edge.hold import READY_FILE, ready_table
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import Routing, routing_from_states
from hunyuan_serve.run.health import State
from hunyuan_serve.run.rundir import worker_user
from tests.api.test_edge import PATHS, message_of
from tests.support.edge import edge_config, upstreams
from tests.support.stacks import free_port

pytestmark = [
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed"),
    pytest.mark.skipif(not Path(ServeConfig().nginx.js_module).is_file(), reason="njs is not installed"),
]

BODY = {"text": "Hello", "source_lang": "en", "target_lang": "zh"}


class Edge:
    """The real Nginx as `up` drives it: the ready file written, then the config loaded."""

    def __init__(self, tmp_path: Path, cfg: ServeConfig) -> None:
        self.cfg, self.nginx = cfg, NginxController(cfg.nginx, tmp_path / "nginx")
        self.web, self.log, self.generation = tmp_path / "web", tmp_path / "nginx.log", 0
        self.web.mkdir(exist_ok=True)

    def render(self, routing: Routing) -> str:
        self.generation += 1
        ready = self.nginx.prefix / READY_FILE
        self.nginx.prepare()
        write_ready(ready, routing)
        return render_nginx(
            self.cfg,
            routing,
            prefix=self.nginx.prefix,
            web_root=self.web,
            worker_user=worker_user(),
            generation=self.generation,
            ready_file=ready,
        )

    async def load(self, routing: Routing) -> None:
        await self.nginx.reload(self.render(routing), self.generation)


@contextlib.asynccontextmanager
async def started(tmp_path: Path, cfg: ServeConfig, routing: Routing) -> AsyncIterator[Edge]:
    edge = Edge(tmp_path, cfg)
    await edge.nginx.start(edge.render(routing), edge.log)
    try:
        yield edge
    finally:
        await edge.nginx.stop(5.0)


def _routing(port: int, state: State) -> Routing:
    return routing_from_states([(f"127.0.0.1:{port}", state)])


def test_the_ready_file_lists_each_pools_ready_replicas() -> None:
    members = [("a:1", State.READY), ("a:2", State.STARTING), ("b:3", State.EVICTED)]
    routing = routing_from_states(members, ["mt-0", "mt-1", "ch-0"], ["mt", "mt", "ch"])
    assert ready_table(routing) == {"mt": ["a:1"], "ch": []}


async def test_a_request_waits_for_the_first_replica_and_is_answered_by_it(tmp_path: Path) -> None:
    port, replica = free_port(), free_port()
    cfg = edge_config(port, {"nginx.hold_s": 60, "nginx.hold_poll_s": 0.05})
    async with (
        started(tmp_path, cfg, _routing(replica, State.STARTING)) as edge,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=60) as http,
    ):
        held = [
            asyncio.ensure_future(http.post(path, json={**BODY, "n": i}))
            for i, path in enumerate(PATHS.values())
        ]
        health = await http.get("/health")  # Nginx's own: no replica ready is still a 503 there
        assert health.status_code == 503 and not any(h.done() for h in held)
        with upstreams(1, keys=False, ports=[replica]) as (script, _):
            await edge.load(_routing(replica, State.READY))  # the held ones are in the old config's worker
            answers = await asyncio.gather(*held)
            assert [a.status_code for a in answers] == [200] * len(PATHS), [a.text for a in answers]
            seen = sorted((s["path"], json.loads(s["body"])["n"]) for s in script.seen)
    # Each went once, with its own body, to the replica that became ready.
    assert seen == sorted((path, i) for i, path in enumerate(PATHS.values()))


async def test_past_hold_s_the_503_in_each_apis_shape(tmp_path: Path) -> None:
    port = free_port()
    cfg = edge_config(port, {"nginx.hold_s": 0.1, "nginx.hold_poll_s": 0.05, "nginx.retry_after_s": 3})
    async with (
        started(tmp_path, cfg, _routing(free_port(), State.STARTING)),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=30) as http,
    ):
        for dialect, path in PATHS.items():
            answer = await http.post(path, json=BODY)
            assert answer.status_code == 503 and answer.headers["retry-after"] == "3", answer.text
            assert "no replica can take" in message_of(dialect, answer.json(), "unavailable")


async def test_a_full_pool_is_refused_at_once_not_held(tmp_path: Path) -> None:
    port = free_port()
    # One place per replica, taken by a request the replica holds until released.
    cfg = edge_config(port, {"nginx.hold_s": 600, "nginx.max_conns": 1, "nginx.bulk_cap": False})
    with upstreams(1, keys=False) as (script, ports):
        async with (
            started(tmp_path, cfg, _routing(ports[0], State.READY)),
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=60) as http,
        ):
            slow = asyncio.ensure_future(http.post("/translate/slow", json=BODY))
            deadline = time.monotonic() + 30
            while not script.seen:  # the slow one has reached the replica
                assert time.monotonic() < deadline and not slow.done(), slow
                await asyncio.sleep(0.02)
            full = await http.post("/translate", json=BODY)
            script.release.set()
            assert (await slow).status_code == 200
    assert full.status_code == 503 and "no replica can take" in message_of(
        "native", full.json(), "unavailable"
    )

"""Admission at the edge, with the real Nginx: past max_conns on every replica Nginx itself answers the
JSON 503 with Retry-After, and the replica never sees the extra request."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import httpx
import pytest

from hunyuan_serve.config import build_config
from hunyuan_serve.edge.controller import NginxController
from hunyuan_serve.edge.dialects import DIALECTS, EDGE_ERRORS, Dialect
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.run.health import State
from hunyuan_serve.run.rundir import worker_user
from tests.support.stacks import free_port

pytestmark = [
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed"),
]


class HeldUpstream:
    """A replica stand-in that holds every request until released, counting the requests it saw."""

    def __init__(self) -> None:
        self.seen = 0
        self.release = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = [
                    int(v)
                    for k, _, v in (x.partition(b":") for x in head.split(b"\r\n"))
                    if k.lower() == b"content-length"
                ]
                await reader.readexactly(length[0] if length else 0)
                self.seen += 1
                await self.release.wait()
                body = json.dumps({"ok": True}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(body), body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def start(self, port: int) -> None:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", port)


def _path_of(dialect: Dialect) -> str:
    """A path of the dialect's that Nginx proxies (its first prefix; a translate route under a folder)."""
    prefix = dialect.prefixes[0]
    return prefix + "translate" if prefix.endswith("/") else prefix


def _children(nginx: NginxController) -> list[int]:
    """The pids of the Nginx master's worker processes."""
    assert nginx.proc is not None
    pid = nginx.proc.pid
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


async def _until(check: object, what: str) -> None:
    for _ in range(500):
        if callable(check) and check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


@pytest.mark.parametrize("workers", [1, 2])
async def test_full_replicas_are_refused_by_nginx_itself(tmp_path: Path, workers: int) -> None:
    port, up_a, up_b = free_port(), free_port(), free_port()
    cfg = build_config(
        {
            "nginx": {"port": port, "worker_processes": workers, "retry_after_s": 3, "worker_priority": -3},
            # Each replica runs one and lets one wait: Nginx sends it two (edge/capacity.py).
            "replica": {"max_in_flight": 1, "max_queued": 1},
        },
        {},
    )
    nginx = NginxController(cfg.nginx, tmp_path / "nginx")
    upstreams = [HeldUpstream(), HeldUpstream()]
    for upstream, p in zip(upstreams, (up_a, up_b), strict=True):
        await upstream.start(p)
    routing = routing_from_states([(f"127.0.0.1:{p}", State.READY) for p in (up_a, up_b)])
    text = render_nginx(cfg, routing, prefix=nginx.prefix, web_root=tmp_path, worker_user=worker_user())
    assert text.count("max_conns=2") == 2
    await nginx.start(text, tmp_path / "nginx.log")
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=0)
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", trust_env=False, limits=limits, timeout=30
        ) as client:
            held = [asyncio.ensure_future(client.post("/translate", json={"text": "x"})) for _ in range(4)]
            await _until(lambda: sum(u.seen for u in upstreams) == 4, "both replicas full")
            # One refusal per dialect, each in that API's own error shape.
            refused = {d.name: await client.post(_path_of(d), json={"text": "x"}) for d in DIALECTS}
            nice = [os.getpriority(os.PRIO_PROCESS, pid) for pid in _children(nginx)]
            for upstream in upstreams:
                upstream.release.set()
            answered = await asyncio.gather(*held)
    finally:
        await nginx.stop(5.0)
        for upstream in upstreams:
            assert upstream.server is not None
            upstream.server.close()
    assert [u.seen for u in upstreams] == [2, 2]  # the refused ones never reached a replica
    assert [r.status_code for r in answered] == [200] * 4
    status, message = EDGE_ERRORS["unavailable"]
    for dialect in DIALECTS:
        r = refused[dialect.name]
        assert r.status_code == status and r.headers["retry-after"] == "3", r.text
        assert r.headers["content-type"].startswith("application/json")
        assert r.json() == dialect.error("unavailable", message), (dialect.name, r.text)
    # worker_priority lands on every worker (a negative nice value needs root; Nginx runs at 0 without).
    assert len(nice) == workers and set(nice) == {-3 if os.geteuid() == 0 else 0}, nice
    errors = (nginx.prefix / "logs" / "error.log").read_text()
    assert "no live upstreams" in errors
    # How the access log tells an edge refusal: the upstream group's name in place of a replica address.
    log = [json.loads(line) for line in nginx.access_log.read_text().splitlines()]
    edge = [e for e in log if e["status"] == 503]
    assert len(edge) == len(DIALECTS) and {e["upstream_addr"] for e in edge} == {"hs_replicas"}, edge

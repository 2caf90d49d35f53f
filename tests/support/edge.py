"""The real Nginx in front of small scripted upstreams on real uvicorn servers (the key check in front)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.types import Receive, Scope, Send

from bench.pool_stubs import routed_edge
from hunyuan_serve.auth import KeyCheck
from hunyuan_serve.config import ServeConfig, build_config
from hunyuan_serve.edge.controller import NginxController
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.run.health import State
from tests.support.stacks import free_port

KEYS = ("key-alpha-0123456789", "key-beta-9876543210")
# The real Nginx the config checks run (None: they are skipped); /usr/sbin is off a plain user's PATH.
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def nginx_t(prefix: Path, text: str) -> subprocess.CompletedProcess[str]:
    """`nginx -t` on this config text, written as prefix/nginx.conf with the logs/ and temp/ it needs."""
    assert NGINX is not None, "nginx is not installed (skip the test on NGINX is None)"
    for sub in ("logs", "temp"):
        (prefix / sub).mkdir(exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(text)
    argv = [NGINX, "-t", "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "e.log")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


@dataclass
class Script:
    """What the upstreams saw, and the gate a stream waits at before its second event."""

    seen: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def echo_app(script: Script, port: int) -> Any:
    """An upstream that answers every request with what it received; /stream and /cut stream SSE."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        path = scope["path"]
        seen = {"port": port, "path": path, "query": scope["query_string"].decode(), "body": body.decode()}
        seen["headers"] = {k.decode(): v.decode() for k, v in scope["headers"]}
        script.seen.append(seen)
        if path.endswith("/stream") or path.endswith("/cut"):
            await _stream(send, script, cut=path.endswith("/cut"))
            return
        if path.endswith("/slow"):
            await asyncio.to_thread(script.release.wait, 30)
        out = json.dumps({k: seen[k] for k in ("port", "path", "query", "body")}).encode()
        # An adapter's own CORS header, which Nginx must replace with its own.
        headers = [(b"content-type", b"application/json"), (b"access-control-allow-origin", b"*")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": out})

    return app


async def _stream(send: Send, script: Script, *, cut: bool) -> None:
    headers = [(b"content-type", b"text/event-stream"), (b"x-accel-buffering", b"no")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"data: one\n\n", "more_body": True})
    if cut:  # the replica dies after the first byte went out
        raise RuntimeError("upstream cut mid-stream")
    await asyncio.to_thread(script.release.wait, 30)
    await send({"type": "http.response.body", "body": b"data: two\n\ndata: [DONE]\n\n"})


@contextlib.contextmanager
def upstreams(
    count: int, *, keys: bool, ports: list[int] | None = None
) -> Iterator[tuple[Script, list[int]]]:
    """count uvicorn servers of echo_app (behind the real KeyCheck when keys), in threads, on these
    ports (default: free ones)."""
    script = Script()
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []
    ports = ports or [free_port() for _ in range(count)]
    try:
        for port in ports:
            app: Any = echo_app(script, port)
            if keys:
                app = KeyCheck(app, frozenset(KEYS), 1 << 20)
            config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
            server = uvicorn.Server(config)
            thread = threading.Thread(target=server.run, daemon=True)
            thread.start()
            servers.append((server, thread))
        for server, _ in servers:
            deadline = time.monotonic() + 20
            while not server.started and time.monotonic() < deadline:
                time.sleep(0.02)
            assert server.started, "an upstream did not start"
        yield script, ports
    finally:
        script.release.set()
        for server, thread in servers:
            server.should_exit = True
            thread.join(10)


def edge_config(port: int, overrides: dict[str, Any]) -> ServeConfig:
    return build_config({"nginx": {"port": port, "worker_processes": 1}}, overrides)


@contextlib.asynccontextmanager
async def edge(tmp_path: Path, cfg: ServeConfig, ports: list[int]) -> AsyncIterator[NginxController]:
    """The real Nginx with the rendered config, routing to the given ready upstream ports."""
    routing = routing_from_states([(f"127.0.0.1:{p}", State.READY) for p in ports])
    async with routed_edge(tmp_path, cfg, routing) as nginx:
        yield nginx


def query(**args: str) -> str:
    return "?" + urllib.parse.urlencode(args)

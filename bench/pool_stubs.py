"""Stub replicas of several pools (plain HTTP servers answering in the replica's shapes) and the real
Nginx, njs routing included, rendered in front of them."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hunyuan_serve.config import ServeConfig, build_config
from hunyuan_serve.edge.controller import NginxController
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import Routing, routing_from_states
from hunyuan_serve.run.health import State
from hunyuan_serve.run.rundir import worker_user


@dataclass
class Stub:
    """One stub replica: the pool it belongs to, the model it answers with, what it was sent."""

    pool: str
    served: str
    seen: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    key: str | None = None  # set: every request needs `Authorization: Bearer KEY`, as the key check asks
    down: bool = False  # listed `down` in its pool's upstream (a replica not ready)


def _openai_error(status: int, code: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}


def _wants_stream(raw: bytes) -> bool:
    try:
        data = json.loads(raw)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("stream") is True


class _Handler(BaseHTTPRequestHandler):
    """Answers like a replica: OpenAI's completions and models, /translate, and the dialects, each
    answer naming the pool, the model served, and the SHA-256 of the body as received."""

    stub: Stub
    protocol_version = "HTTP/1.1"
    # Headers and body are two writes: with Nagle's algorithm the second waits for the peer's delayed
    # ACK (~40 ms), which would swamp every figure the bench reads through these stubs.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the test reads `seen`
        return

    def do_GET(self) -> None:
        self._answer(b"")

    def do_POST(self) -> None:
        self._answer(self.rfile.read(int(self.headers.get("content-length") or 0)))

    def _answer(self, raw: bytes) -> None:
        path = self.path.split("?")[0]
        digest = hashlib.sha256(raw).hexdigest()
        self.stub.seen.append({"path": self.path, "sha256": digest, "size": len(raw)})
        if path == "/v1/chat/completions" and _wants_stream(raw):
            self._stream()
            return
        status, body = self._body(path, raw)
        if self.stub.key and self.headers.get("authorization") != f"Bearer {self.stub.key}":
            status, body = 401, _openai_error(401, "invalid_api_key", "an API key is required")
        body.update(pool=self.stub.pool, sha256=digest, path=self.path)
        out = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def _stream(self) -> None:
        """A chat stream as the replica sends it (X-Accel-Buffering: no), then the connection closed."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("x-accel-buffering", "no")
        self.send_header("connection", "close")
        self.end_headers()
        head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": self.stub.served}
        for delta, finish in (
            ({"role": "assistant", "content": ""}, None),
            ({"content": self.stub.pool}, None),
        ):
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            self.wfile.write(f"data: {json.dumps({**head, 'choices': [choice]})}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True

    def _body(self, path: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        served = self.stub.served
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": served, "object": "model"}]}
        if path.startswith("/v1/models/"):
            name = path.removeprefix("/v1/models/")
            if name != served:
                return 404, _openai_error(404, "model_not_found", f"the model '{name}' does not exist")
            return 200, {"id": served, "object": "model", "created": 0, "owned_by": "hunyuan-serve"}
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            if path.startswith("/v1/"):
                return 400, _openai_error(400, "invalid_json", "body is not valid JSON")
            return 400, {"error": {"code": "invalid_json", "message": "body is not valid JSON"}}
        if path in ("/v1/chat/completions", "/v1/completions"):
            return 200, self._completion(path, data)
        return 200, {"result": f"from {self.stub.pool}", "model": served}

    def _completion(self, path: str, data: dict[str, Any]) -> dict[str, Any]:
        text = f"pool {self.stub.pool}"
        chat = path.endswith("chat/completions")
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "logprobs": None}
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        return {
            "id": "cmpl-stub",
            "object": "chat.completion" if chat else "text_completion",
            "created": 0,
            "model": self.stub.served,
            "choices": [choice],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }


@contextlib.contextmanager
def stub_servers(stubs: list[Stub]) -> Iterator[list[Stub]]:
    """Each stub on its own free loopback port, served from a thread."""
    servers = []
    try:
        for stub in stubs:
            handler = type("Handler", (_Handler,), {"stub": stub})
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            server.daemon_threads = True
            stub.port = server.server_address[1]
            # A short poll, so shutdown() returns at once.
            threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
            servers.append(server)
        yield stubs
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def pools_config(port: int, pools: list[dict[str, Any]], overrides: Mapping[str, Any]) -> ServeConfig:
    data = {"nginx": {"port": port, "worker_processes": 1}, "pools": pools}
    return build_config(data, dict(overrides))


@contextlib.asynccontextmanager
async def pooled_edge(tmp_path: Path, cfg: ServeConfig, stubs: list[Stub]) -> AsyncIterator[NginxController]:
    """The real Nginx with the rendered config of these pools, each stub a ready replica of its pool."""
    members = [(f"127.0.0.1:{s.port}", State.STARTING if s.down else State.READY) for s in stubs]
    names = [f"{s.pool}-{i}" for i, s in enumerate(stubs)]
    async with routed_edge(
        tmp_path, cfg, routing_from_states(members, names, [s.pool for s in stubs])
    ) as nginx:
        yield nginx


@contextlib.asynccontextmanager
async def routed_edge(tmp_path: Path, cfg: ServeConfig, routing: Routing) -> AsyncIterator[NginxController]:
    """The real Nginx with cfg rendered for this routing, under tmp_path; stopped after."""
    nginx = NginxController(cfg.nginx, tmp_path / "nginx")
    web = tmp_path / "web"
    web.mkdir(parents=True, exist_ok=True)
    text = render_nginx(cfg, routing, prefix=nginx.prefix, web_root=web, worker_user=worker_user())
    await nginx.start(text, tmp_path / "nginx.log")
    try:
        yield nginx
    finally:
        await nginx.stop(5.0)

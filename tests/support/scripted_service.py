"""A real local HTTP server that answers like the service, scripted per test (503s, drops, slowness)."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import hunyuan_serve

WEB_ROOT = (Path(hunyuan_serve.__file__).parent / "web").resolve()
_CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css"}
LANGUAGES = [
    {"code": "en", "name": "English", "native_name": "English"},
    {"code": "zh", "name": "Chinese", "native_name": "中文"},
    {"code": "fr", "name": "French", "native_name": "Français"},
]

HOLD_TIMEOUT_S = 10.0
# A `qa` script: (source, answer) -> the checks the answer fails, each {"check": NAME, "detail": words}.
Checks = Callable[[str, str], list[dict[str, str]]]


def mock_translate(text: str, target: str) -> str:
    """A deterministic 'translation' that keeps placeholders: tags the text with the target."""
    return f"[{target}] {text}"


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False  # close the connection without answering


def _open_gate() -> threading.Event:
    gate = threading.Event()
    gate.set()
    return gate


@dataclass
class ServiceState:
    """What the server will answer next and what it saw."""

    script: list[Reply] = field(default_factory=list)
    translate: Callable[[str, str], str] = mock_translate
    # When set, answers carry `qa` as the service's checks do (not for a request that asks qa "off").
    qa: Checks | None = None
    delay_s: float = 0.0
    model: str | None = None  # what /health names, when set
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)  # each request's Authorization
    times: list[float] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    hold: int = 0  # when set, requests wait until this many were in flight at once (or HOLD_TIMEOUT_S)
    headers: dict[str, str] = field(default_factory=dict)  # sent with every POST's answer (as Nginx adds)
    # `stream: true` requests get SSE: the first half of the text, then (once this is set) the rest.
    stream_gate: threading.Event = field(default_factory=lambda: _open_gate())
    lock: threading.Condition = field(default_factory=threading.Condition)

    def reset(self) -> None:
        with self.lock:
            self.script.clear()
            self.translate = mock_translate
            self.qa = None
            self.delay_s = 0.0
            self.hold = 0
            self.headers = {}
            self.stream_gate = _open_gate()
            self.model = None
            self.requests.clear()
            self.authorizations.clear()
            self.times.clear()
            self.in_flight = self.max_in_flight = 0

    def sent_texts(self) -> list[str]:
        texts: list[str] = []
        for body in self.requests:
            texts.extend(body.get("texts") or ([body["text"]] if "text" in body else []))
        return texts


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/languages":
            self.server.state.authorizations.append(self.headers.get("Authorization"))
            self._send(Reply(200, {"languages": LANGUAGES}))
        elif self.path.startswith("/health"):
            model = self.server.state.model
            self._send(Reply(200, {"status": "ready", **({"model": model} if model else {})}))
        else:
            self._send_static()

    def do_POST(self) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.startswith("/memories/"):  # a service without translation memories: not recorded
            self._send(Reply(404, {"error": {"code": "not_found", "message": self.path}}))
            return
        with state.lock:
            state.requests.append(body)
            state.authorizations.append(self.headers.get("Authorization"))
            state.times.append(time.monotonic())
            reply = state.script.pop(0) if state.script else None
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
            # Holding the first requests makes "this many at once" a count, not a race against the clock.
            state.lock.notify_all()
            state.lock.wait_for(lambda: state.max_in_flight >= state.hold, timeout=HOLD_TIMEOUT_S)
        try:
            time.sleep(state.delay_s)
            if reply is None:
                reply = self._translate(body, state)
            reply = dataclasses.replace(reply, headers={**state.headers, **reply.headers})
            if reply.status == 200 and body.get("stream") and "result" in reply.body:
                self._send_stream(reply.body["result"], state)
            else:
                self._send(reply)
        finally:
            with state.lock:
                state.in_flight -= 1

    def _translate(self, body: dict[str, Any], state: ServiceState) -> Reply:
        target = body.get("target_lang") or body.get("tgt_lang")
        if target not in {lang["code"] for lang in LANGUAGES}:
            supported = ", ".join(lang["code"] for lang in LANGUAGES)
            message = f"unsupported language {target!r}; supported: {supported}"
            return Reply(400, {"error": {"code": "unsupported_language", "message": message}})
        checks = state.qa if body.get("qa") != "off" else None
        if "texts" in body:
            results = [state.translate(t, target) for t in body["texts"]]
            answer = {"results": results, "cached": [False] * len(results), "latency_ms": 1.0}
            if checks is not None:
                answer["qa"] = [checks(t, r) for t, r in zip(body["texts"], results, strict=True)]
            return Reply(200, answer)
        result = state.translate(body["text"], target)
        one: dict[str, Any] = {"result": result, "cached": False, "latency_ms": 1.0}
        if checks is not None:
            one["qa"] = checks(body["text"], result)
        return Reply(200, one)

    def _send_stream(self, text: str, state: ServiceState) -> None:
        """/translate's `stream: true` answer: two delta events with the gate between, then the answer."""
        half = max(1, len(text) // 2)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")  # no length: the body ends with the connection
        self.end_headers()
        self.close_connection = True
        self.wfile.write(f"data: {json.dumps({'delta': text[:half]})}\n\n".encode())
        state.stream_gate.wait(HOLD_TIMEOUT_S)
        self.wfile.write(f"data: {json.dumps({'delta': text[half:]})}\n\n".encode())
        done = {"done": True, "result": text, "cached": False, "latency_ms": 1.0}
        self.wfile.write(f"data: {json.dumps(done)}\n\n".encode())

    def _send_static(self) -> None:
        """The page's files, as Nginx serves them at / in the real stack."""
        name = self.path.split("?", 1)[0].lstrip("/") or "index.html"
        path = (WEB_ROOT / name).resolve()
        if WEB_ROOT not in path.parents or not path.is_file():
            self._send(Reply(404, {"error": {"code": "not_found", "message": self.path}}))
            return
        data = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", _CONTENT_TYPES.get(path.suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send(self, reply: Reply) -> None:
        if reply.drop:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        data = json.dumps(reply.body, ensure_ascii=False).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: ServiceState


@dataclass
class ScriptedService:
    url: str
    state: ServiceState


def start_server() -> tuple[_Server, threading.Thread]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = ServiceState()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return server, thread


def requests_seen(app: Any) -> list[str]:
    """'METHOD /path' of each request a real replica app (FastAPI) gets from now on, appended in order."""
    from fastapi import Request, Response

    seen: list[str] = []

    @app.middleware("http")
    async def count(request: Request, call_next: Any) -> Response:
        seen.append(f"{request.method} {request.url.path}")
        response: Response = await call_next(request)
        return response

    return seen

"""A scripted HTTP server on a thread for tests of clients (the bench's k6 scripts, probe and person)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

Server = TypeVar("Server", bound=ThreadingHTTPServer)


@contextlib.contextmanager
def serving(server: Server) -> Iterator[Server]:
    """`server` answering on a daemon thread for the block; shut down and closed after it."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def send_json(
    handler: BaseHTTPRequestHandler, status: int, body: Any, headers: Mapping[str, str] | None = None
) -> None:
    """One JSON answer with its length (the connection stays usable), and any extra headers."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)

"""A page on another origin calls the stack through the real Nginx in headless chromium, with CORS on."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hunyuan_serve.config import ServeConfig
from tests.support.edge import KEYS, edge, edge_config, upstreams
from tests.support.stacks import free_port

pytestmark = [
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed"),
]

PAGE = b"""<!doctype html><meta charset="utf-8"><title>another origin</title>
<script>
// What a browser extension or a web app on its own origin does: a JSON POST with a key header and
// the README's X-Priority for a person's request (so the browser sends a preflight first, which must
// allow both).
async function callStack(url, key) {
  try {
    const answer = await fetch(url, {method: "POST", body: JSON.stringify({text_list: ["hi"]}),
      headers: {"Authorization": "Bearer " + key, "Content-Type": "application/json",
                "X-Priority": "interactive"}});
    return {status: answer.status, body: await answer.text(), id: answer.headers.get("X-Request-ID")};
  } catch (err) {
    return {error: String(err)};
  }
}
</script>"""


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def page_port() -> Iterator[int]:
    """A second local HTTP server serving the calling page: its own origin, not the stack's."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_allowed_origin_calls_the_stack_and_another_is_blocked(
    tmp_path: Path, browser: Any, page_port: int
) -> None:
    port = free_port()
    allowed = f"http://127.0.0.1:{page_port}"  # http://localhost:{page_port} is another origin
    cfg = edge_config(port, {"nginx.cors_origins": allowed})
    url = f"http://127.0.0.1:{port}/immersive/translate"
    with upstreams(1, keys=True) as (script, ports), _edge_beside(tmp_path, cfg, ports):
        results = {
            origin: _call_from(browser, f"{origin}/", url, KEYS[0])
            for origin in (allowed, f"http://localhost:{page_port}")
        }
        wrong = _call_from(browser, f"{allowed}/", url, "wrong-key")
    ok = results[allowed]
    assert ok.get("status") == 200, ok
    assert json.loads(json.loads(ok["body"])["body"]) == {"text_list": ["hi"]}
    assert script.seen[0]["headers"]["x-priority"] == "interactive"  # the header got through
    assert ok["id"]  # X-Request-ID is exposed to the page
    blocked = results[f"http://localhost:{page_port}"]
    assert "Failed to fetch" in blocked.get("error", ""), blocked
    # The refusal carries the CORS header too, so the page can read why.
    assert wrong.get("status") == 403 and "Invalid API key" in wrong["body"], wrong
    # Nginx answered the preflights itself; a disallowed page's request never reached a replica.
    assert [seen["headers"]["origin"] for seen in script.seen] == [allowed]


@contextlib.contextmanager
def _edge_beside(tmp_path: Path, cfg: ServeConfig, ports: list[int]) -> Iterator[None]:
    """The edge on an event loop of its own thread: playwright's sync API holds this thread's loop."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    manager = edge(tmp_path, cfg, ports)
    asyncio.run_coroutine_threadsafe(manager.__aenter__(), loop).result(60)
    try:
        yield
    finally:
        asyncio.run_coroutine_threadsafe(manager.__aexit__(None, None, None), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _call_from(browser: Any, page_url: str, url: str, key: str) -> dict[str, Any]:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(page_url)
        result: dict[str, Any] = page.evaluate("([url, key]) => callStack(url, key)", [url, key])
        return result
    finally:
        context.close()

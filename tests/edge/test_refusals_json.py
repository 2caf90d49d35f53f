"""Nginx's own refusals through the real Nginx: an unknown path's 404, a method's 405 with Allow, a 413,
each in the JSON shape of the path's API."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from hunyuan_serve.edge.dialects import ROUTE_METHODS, allow_header
from tests.support.edge import edge, edge_config
from tests.support.stacks import free_port

pytestmark = [
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed"),
]


def client(port: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=30)


async def test_nginx_refusals_are_json_in_each_apis_shape_with_allow(tmp_path: Path) -> None:
    port = free_port()
    cfg = edge_config(port, {"nginx.client_max_body_size": "1k"})
    async with edge(tmp_path, cfg, [free_port()]), client(port) as http:
        missing = await http.get("/no/such/page")
        assert missing.status_code == 404, missing.text
        assert missing.headers["content-type"].startswith("application/json")
        assert missing.json()["error"]["code"] == "not_found"
        # Nginx answers /health itself: another method is its 405, with the methods it takes.
        put = await http.put("/health", json={})
        assert put.status_code == 405 and put.headers["allow"] == "GET, HEAD", put.text
        assert put.json()["error"]["code"] == "method_not_allowed"
        # A method a replica's path does not take is Nginx's 405 too, replicas up or not (none is here).
        patch = await http.patch("/translate", json={})
        assert patch.status_code == 405 and patch.headers["allow"] == "POST", patch.text
        assert patch.json()["error"]["code"] == "method_not_allowed"
        # TRACE never reaches a replica: Nginx's 405 names the path's methods, in DeepL's shape here.
        trace = await http.request("TRACE", "/v2/glossaries/abc")
        assert trace.status_code == 405, trace.text
        assert trace.headers["allow"] == allow_header(ROUTE_METHODS["/v2/glossaries/{glossary_id}"])
        assert set(trace.json()) == {"message"}
        openai = await http.request("TRACE", "/v1/models/some/model")
        assert openai.headers["allow"] == "GET, HEAD"
        assert openai.json()["error"]["code"] == "method_not_allowed"
        assert set(openai.json()["error"]) == {"message", "type", "param", "code"}
        # A body too large for the page's location is the 413 in JSON too.
        big = await http.post("/", content=b"x" * 4096)
        assert big.status_code == 413 and "exceeds 1k" in big.json()["error"]["message"], big.text
        libre = await http.request("TRACE", "/libretranslate/translate")
        assert libre.headers["allow"] == "POST" and isinstance(libre.json()["error"], str)

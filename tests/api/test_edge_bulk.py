"""The edge's bulk cap against the real Nginx: a full pool refuses bulk first, in each API's
overload shape, while interactive work still gets a place; with several pools, each pool its own cap."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from hunyuan_serve.config import build_config
from hunyuan_serve.edge.controller import NginxController
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.run.health import State
from hunyuan_serve.run.rundir import worker_user
from tests.api.test_edge import PATHS, client, message_of
from tests.support.edge import Script, edge, edge_config, upstreams
from tests.support.stacks import free_port

JS_MODULE = Path("/usr/lib/nginx/modules/ngx_http_js_module.so")
pytestmark = [
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed"),
]
BULK = {"X-Priority": "bulk"}
# One replica taking 4 at once, half kept for interactive work: bulk may hold 2.
SMALL_POOL = {"nginx.max_conns": 4, "replica.interactive_reserve": 0.5, "nginx.retry_after_s": 3}


async def _until(check: Callable[[], bool], what: str) -> None:
    for _ in range(1000):  # bounded: 10 s
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never saw {what}")


def _held(script: Script, path: str) -> int:
    return sum(seen["path"] == path for seen in script.seen)


async def test_a_full_pool_refuses_bulk_first_and_still_answers_interactive(tmp_path: Path) -> None:
    port = free_port()
    cfg = edge_config(port, SMALL_POOL)
    with upstreams(1, keys=False) as (script, ports):
        async with edge(tmp_path, cfg, ports), client(port) as http:
            jobs = [asyncio.ensure_future(http.post("/translate/slow", json={}, headers=BULK)) for _ in "ab"]
            await _until(lambda: _held(script, "/translate/slow") == 2, "two bulk requests held upstream")
            # The bulk cap is reached: every API's bulk request is refused by Nginx, in its own shape.
            for dialect, path in PATHS.items():
                refused = await http.post(path, json={"q": "x"}, headers={"X-Priority": "Bulk"})
                assert refused.status_code == 503 and refused.headers["retry-after"] == "3", refused.text
                assert "bulk work is at this pool's cap" in message_of(dialect, refused.json(), "overloaded")
            # A person still gets in, with the header or without: two places are theirs.
            for headers in ({}, {"X-Priority": "interactive"}):
                answered = await http.post("/translate", json={"q": "page"}, headers=headers)
                assert answered.status_code == 200 and answered.json()["path"] == "/translate"
            people = [asyncio.ensure_future(http.post("/v1/slow", json={})) for _ in "ab"]
            await _until(lambda: _held(script, "/v1/slow") == 2, "two interactive requests held upstream")
            # Now every place is taken: interactive work too gets the edge's 503 (max_conns), not bulk's.
            full = await http.post("/translate", json={"q": "late"})
            assert full.status_code == 503
            assert "no replica can take" in message_of("native", full.json(), "unavailable")
            assert not [s for s in script.seen if s["path"] == "/translate" and "x" in s["body"]]
            script.release.set()
            assert [r.status_code for r in await asyncio.gather(*jobs, *people)] == [200] * 4
            # Their places given back, bulk gets in again.
            assert (await http.post("/translate", json={}, headers=BULK)).status_code == 200


async def test_without_the_cap_bulk_takes_every_place(tmp_path: Path) -> None:
    port = free_port()
    cfg = edge_config(port, {**SMALL_POOL, "nginx.bulk_cap": False})
    with upstreams(1, keys=False) as (script, ports):
        async with edge(tmp_path, cfg, ports), client(port) as http:
            jobs = [asyncio.ensure_future(http.post("/translate/slow", json={}, headers=BULK)) for _ in "abc"]
            await _until(lambda: _held(script, "/translate/slow") == 3, "three bulk requests held upstream")
            assert (await http.post("/translate", json={}, headers=BULK)).status_code == 200
            script.release.set()
            assert [r.status_code for r in await asyncio.gather(*jobs)] == [200] * 3


def _two_pools(port: int, overrides: dict[str, Any]) -> Any:
    pools = [
        {"name": "mt", "model": "tencent/Hunyuan-MT-7B", "replicas": 2},
        {"name": "small", "model": "hy-mt-small", "replica": {"interactive_reserve": 0.75}},
    ]
    data = {"nginx": {"port": port, "worker_processes": 1, "max_conns": 2}, "pools": pools}
    return build_config(data, overrides)


@pytest.mark.skipif(not JS_MODULE.exists(), reason="njs (libnginx-mod-http-js) not installed")
async def test_each_pool_caps_its_own_bulk_behind_the_model_routing(tmp_path: Path) -> None:
    port = free_port()
    cfg = _two_pools(port, {})
    with upstreams(3, keys=False) as (script, ports):
        nginx = NginxController(cfg.nginx, tmp_path / "nginx")
        members = [(f"127.0.0.1:{p}", State.READY) for p in ports]
        routing = routing_from_states(members, ["mt-0", "mt-1", "small-0"], ["mt", "mt", "small"])
        web = tmp_path / "web"
        web.mkdir()
        text = render_nginx(cfg, routing, prefix=nginx.prefix, web_root=web, worker_user=worker_user())
        # mt: 2 replicas x 2 places, a quarter kept: 3 for bulk; small: 1 x 2, three quarters kept: 1.
        assert "limit_conn hs_pool_mt_bulk 3;" in text and "limit_conn hs_pool_small_bulk 1;" in text
        await nginx.start(text, tmp_path / "nginx.log")
        try:
            async with client(port) as http:
                await _routed_caps(http, script, ports)
        finally:
            script.release.set()
            await nginx.stop(5.0)


async def _routed_caps(http: httpx.AsyncClient, script: Script, ports: list[int]) -> None:
    def chat(model: str, headers: dict[str, str]) -> Any:
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
        return asyncio.ensure_future(http.post("/v1/chat/completions/slow", json=body, headers=headers))

    small = chat("hy-mt-small", BULK)
    await _until(lambda: any(s["port"] == ports[2] for s in script.seen), "small's bulk request upstream")
    refused = await chat("hy-mt-small", BULK)
    assert refused.status_code == 503
    assert "bulk work" in message_of("openai", refused.json(), "overloaded")
    # The other pool's bulk is counted apart: its three places are free.
    mt = [chat("tencent/Hunyuan-MT-7B", BULK) for _ in range(3)]
    await _until(lambda: len(script.seen) == 4, "three mt bulk requests upstream")
    assert (await chat("tencent/Hunyuan-MT-7B", BULK)).status_code == 503
    # Interactive work still reaches both pools.
    person = chat("hy-mt-small", {})
    await _until(lambda: len(script.seen) == 5, "the person's request at small's replica")
    assert script.seen[-1]["port"] == ports[2]
    script.release.set()
    assert [r.status_code for r in await asyncio.gather(small, person, *mt)] == [200] * 5

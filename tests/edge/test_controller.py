"""The Nginx adapter against the real nginx: start, reload to a new generation, bad config kept out, stop."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import httpx
import pytest

from hunyuan_serve.config import build_config
from hunyuan_serve.edge.controller import NginxController, NginxError
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.run.health import State
from hunyuan_serve.run.procs import pid_alive
from hunyuan_serve.run.rundir import worker_user
from tests.support.stacks import free_port

pytestmark = [
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed"),
]


async def test_start_reload_reject_stop(tmp_path: Path) -> None:
    port, dead = free_port(), free_port()
    # A model name Nginx must not read as a variable or a string's end; /health names it as it is.
    model = "/models/it's $HOME\\mt"
    cfg = build_config(
        {
            "engine": {"model": model, "prompt_family": "hy-mt1.5"},
            "nginx": {"port": port, "worker_processes": 1, "retry_after_s": 3},
        },
        {},
    )
    nginx = NginxController(cfg.nginx, tmp_path / "nginx")
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<h1>page</h1>")

    def conf(state: State, generation: int) -> str:
        routing = routing_from_states([(f"127.0.0.1:{dead}", state)])
        return render_nginx(
            cfg, routing, prefix=nginx.prefix, web_root=web, worker_user=worker_user(), generation=generation
        )

    pid = await nginx.start(conf(State.STARTING, 1), tmp_path / "nginx.log")
    try:
        # No keepalive: a kept connection may still be served once by a pre-reload worker.
        limits = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", trust_env=False, limits=limits
        ) as client:
            health = await client.get("/health")
            assert health.status_code == 503 and health.headers["retry-after"] == "3"
            assert health.json() == {
                "status": "unavailable",
                "model": "it's $HOME\\mt",  # the served name: the checkpoint's directory
                "family": "hy-mt1.5",
                "ready": 0,
                "replicas": 1,
                "config": 1,
            }
            none_ready = await client.post("/translate", json={"text": "x"})
            assert none_ready.status_code == 503 and none_ready.headers["retry-after"] == "3"
            assert none_ready.json()["error"]["code"] == "unavailable"
            assert (await client.get("/")).text == "<h1>page</h1>"

            # Routable but the port is closed: Nginx's own 502 becomes the same JSON 503.
            await nginx.reload(conf(State.READY, 2), 2)
            assert (await client.get("/health")).json() == {
                "status": "ready",
                "model": "it's $HOME\\mt",
                "family": "hy-mt1.5",
                "ready": 1,
                "replicas": 1,
                "config": 2,
            }
            refused = await client.post("/translate", json={"text": "x"}, headers={"X-Request-ID": "abc-1"})
            assert refused.status_code == 503 and refused.headers["x-request-id"] == "abc-1"

            good = nginx.conf_path.read_text()
            with pytest.raises(NginxError, match="nginx -t rejected the config"):
                await nginx.reload(good.replace("least_conn;", "least_conn bogus;"), 3)
            assert nginx.conf_path.read_text() == good
            assert (await client.get("/health")).json()["config"] == 2
    finally:
        await nginx.stop(5.0)
    assert not pid_alive(pid)
    await asyncio.sleep(0)
    log = (nginx.access_log).read_text().splitlines()
    assert any('"request_id":"abc-1"' in line and '"status":503' in line for line in log)


async def test_rate_limit_answers_429_json(tmp_path: Path) -> None:
    port, dead = free_port(), free_port()
    cfg = build_config(
        {"nginx": {"port": port, "worker_processes": 1, "rate_limit_rps": 1, "rate_limit_burst": 0}}, {}
    )
    nginx = NginxController(cfg.nginx, tmp_path / "nginx")
    routing = routing_from_states([(f"127.0.0.1:{dead}", State.READY)])
    text = render_nginx(cfg, routing, prefix=nginx.prefix, web_root=tmp_path, worker_user=worker_user())
    await nginx.start(text, tmp_path / "nginx.log")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as client:
            # Until one is limited (one a second, no burst: the next within the second), not "3 within 1 s".
            codes = [await client.post("/translate", json={"text": "x"})]
            deadline = time.monotonic() + 30
            while codes[-1].status_code != 429 and time.monotonic() < deadline:
                codes.append(await client.post("/translate", json={"text": "x"}))
    finally:
        await nginx.stop(5.0)
    limited = [r for r in codes if r.status_code == 429]
    assert limited and codes[0].status_code != 429, [r.status_code for r in codes]
    assert limited[0].json()["error"]["code"] == "rate_limited" and limited[0].headers["retry-after"] == "1"

"""X-Hunyuan-Bulk-Texts against the real Nginx: what a pool's ready engines batch for bulk
work, on each answer a replica gave, from the same readiness the upstream is rendered from."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.pool_stubs import routed_edge
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.run.health import State
from hunyuan_serve.run.rundir import worker_user
from tests.api.test_edge import client
from tests.api.test_edge_bulk import JS_MODULE, _two_pools
from tests.support.edge import edge_config, upstreams
from tests.support.stacks import free_port

pytestmark = [
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed"),
]
HEADER = "X-Hunyuan-Bulk-Texts"


async def test_the_header_counts_the_ready_replicas_engines(tmp_path: Path) -> None:
    port = free_port()
    cfg = edge_config(port, {"engine.max_num_seqs": 40, "replica.interactive_reserve": 0.25})
    with upstreams(3, keys=False) as (_, ports):
        states = [State.READY, State.READY, State.EVICTED]
        routing = routing_from_states([(f"127.0.0.1:{p}", s) for p, s in zip(ports, states, strict=True)])
        async with routed_edge(tmp_path, cfg, routing), client(port) as http:
            answered = await http.post("/translate", json={"q": "x"})
            assert answered.status_code == 200 and answered.headers[HEADER] == "60"  # 2 x 40, a quarter kept
            # What no replica answered says nothing: Nginx's own page and its /health.
            assert HEADER not in (await http.get("/health")).headers
            assert HEADER not in (await http.get("/")).headers


async def test_no_ready_replica_no_header(tmp_path: Path) -> None:
    port = free_port()
    cfg = edge_config(port, {})
    routing = routing_from_states([(f"127.0.0.1:{free_port()}", State.STARTING)])
    async with routed_edge(tmp_path, cfg, routing), client(port) as http:
        refused = await http.post("/translate", json={})
        assert refused.status_code >= 500 and HEADER not in refused.headers


@pytest.mark.skipif(not JS_MODULE.exists(), reason="njs (libnginx-mod-http-js) not installed")
async def test_each_pool_says_its_own_behind_the_model_routing(tmp_path: Path) -> None:
    port = free_port()
    cfg = _two_pools(port, {"engine.max_num_seqs": 8})
    with upstreams(3, keys=False) as (_, ports):
        members = [(f"127.0.0.1:{p}", State.READY) for p in ports]
        routing = routing_from_states(members, ["mt-0", "mt-1", "small-0"], ["mt", "mt", "small"])
        text = render_nginx(cfg, routing, prefix=tmp_path, web_root=tmp_path, worker_user=worker_user())
        assert "hs_pool_mt 12;" in text and "hs_pool_small 2;" in text
        async with routed_edge(tmp_path, cfg, routing), client(port) as http:
            for model, texts in (("tencent/Hunyuan-MT-7B", "12"), ("hy-mt-small", "2")):
                body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
                answered = await http.post("/v1/chat/completions", json=body)
                assert answered.status_code == 200 and answered.headers[HEADER] == texts, model

"""Several pools behind the real Nginx: njs routes each request by its body's model to that pool's stub
replicas; /v1/models lists every pool; an unknown model is a 404 in the path's API shape."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from bench import netns
from bench.pool_stubs import Stub, pooled_edge, pools_config, stub_servers
from hunyuan_serve.edge.dialects import INTERNAL_ONLY
from tests.support.stacks import free_port

JS_MODULE = Path("/usr/lib/nginx/modules/ngx_http_js_module.so")
UNAVAILABLE = netns.unavailable()
pytestmark = [
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed"),
    pytest.mark.skipif(not JS_MODULE.exists(), reason="njs (libnginx-mod-http-js) not installed"),
]

MT, SMALL, CHIMERA = "tencent/Hunyuan-MT-7B", "hy-mt-small", "tencent/Hunyuan-MT-Chimera-7B"
POOLS: list[dict[str, Any]] = [
    {"name": "mt", "model": MT, "replicas": 2},
    # Served under a name of its own: that name is the one the edge routes (and the replica answers).
    {"name": "small", "model": "/models/HY-MT1.5-1.8B", "engine": {"served_model_name": SMALL}},
    {"name": "chimera", "model": CHIMERA},
]


def stubs() -> list[Stub]:
    return [Stub("mt", MT), Stub("mt", MT), Stub("small", SMALL), Stub("chimera", CHIMERA)]


def client(port: int, host: str = "127.0.0.1") -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://{host}:{port}", trust_env=False, timeout=30)


def openai_client(port: int, key: str = "unused") -> openai.AsyncOpenAI:
    http = httpx.AsyncClient(trust_env=False, timeout=30)
    return openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key=key, http_client=http, max_retries=0
    )


async def test_openai_client_gets_each_model_from_its_own_pool(tmp_path: Path) -> None:
    port = free_port()
    with stub_servers(stubs()) as running:
        async with pooled_edge(tmp_path, pools_config(port, POOLS, {}), running):
            api = openai_client(port)
            for model, pool in ((MT, "mt"), (SMALL, "small"), (CHIMERA, "chimera"), (MT, "mt")):
                messages: Any = [{"role": "user", "content": "Translate: hello"}]
                chat = await api.chat.completions.create(model=model, messages=messages)
                assert chat.model == model and chat.choices[0].message.content == f"pool {pool}"
                text = await api.completions.create(model=model, prompt="hello")
                assert text.model == model and text.choices[0].text == f"pool {pool}"
            stream = await api.chat.completions.create(model=SMALL, messages=messages, stream=True)
            chunks = [chunk async for chunk in stream]
            assert {c.model for c in chunks} == {SMALL}
            assert "".join(c.choices[0].delta.content or "" for c in chunks) == "small"
            listed = await api.models.list()
            assert [m.id for m in listed.data] == [MT, SMALL, CHIMERA]
            card = await api.models.retrieve(SMALL)
            assert card.id == SMALL
            with pytest.raises(openai.NotFoundError) as unknown:
                await api.chat.completions.create(model="gpt-4o", messages=messages)
            assert unknown.value.code == "model_not_found" and "'gpt-4o'" in unknown.value.message
            assert isinstance(unknown.value.body, dict) and unknown.value.body["param"] == "model"
            assert unknown.value.body["type"] == "invalid_request_error"
            with pytest.raises(openai.NotFoundError) as unknown_card:
                await api.models.retrieve("gpt-4o")
            assert unknown_card.value.code == "model_not_found"
            await api.close()
        # Both replicas of pool mt took a share (least_conn over the pool's own upstream).
        assert all(s.seen for s in running), [len(s.seen) for s in running]


async def test_native_translate_routes_by_model_single_and_batch(tmp_path: Path) -> None:
    port = free_port()
    with stub_servers(stubs()) as running:
        async with pooled_edge(tmp_path, pools_config(port, POOLS, {}), running), client(port) as http:
            one = await http.post("/translate", json={"text": "hi", "target_lang": "zh", "model": SMALL})
            assert one.status_code == 200 and one.json()["pool"] == "small", one.text
            batch = {"texts": ["a", "b"], "target_lang": "zh", "model": CHIMERA}
            assert (await http.post("/translate", json=batch)).json()["pool"] == "chimera"
            # No model: the default pool (the first: mt).
            plain = await http.post("/translate", json={"text": "hi", "target_lang": "zh"})
            assert plain.json()["pool"] == "mt"
            unknown = await http.post(
                "/translate", json={"text": "hi", "target_lang": "zh", "model": 'x$&"y'}
            )
            assert unknown.status_code == 404, unknown.text
            error = unknown.json()
            assert set(error) == {"error"} and set(error["error"]) == {"code", "message"}
            assert error["error"]["code"] == "model_not_found" and "'x$&\"y'" in error["error"]["message"]
            assert unknown.headers["x-request-id"]
            # Not JSON, or model not a string: the default pool's replica answers, in its own shape.
            bad = await http.post(
                "/translate", content=b"{not json", headers={"content-type": "application/json"}
            )
            assert bad.status_code == 400 and bad.json()["pool"] == "mt" and bad.json()["error"]["code"]
            odd = await http.post("/v1/chat/completions", json={"model": 7, "messages": []})
            assert odd.json()["pool"] == "mt"
            # A body that holds a `model` deeper down is not routed by it.
            nested = {"text": "hi", "target_lang": "zh", "context": {"model": SMALL}}
            assert (await http.post("/translate", json=nested)).json()["pool"] == "mt"


async def test_models_list_with_keys_asks_the_replicas_to_check_the_key(tmp_path: Path) -> None:
    port = free_port()
    keys = tmp_path / "keys"
    keys.write_text("key-alpha-0123456789\n")
    cfg = pools_config(port, POOLS, {"auth.keys_file": str(keys)})
    keyed = stubs()
    for stub in keyed:
        stub.key = "key-alpha-0123456789"
    with stub_servers(keyed) as running:
        async with pooled_edge(tmp_path, cfg, running), client(port) as http:
            refused = await http.get("/v1/models")
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
            wrong = await http.get("/v1/models", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            api = openai_client(port, "key-alpha-0123456789")
            assert [m.id for m in (await api.models.list()).data] == [MT, SMALL, CHIMERA]
            await api.close()
    # The check went to the default pool's replicas, as GET /v1/models.
    checked = [seen["path"] for stub in running[:2] for seen in stub.seen]
    assert checked.count("/v1/models") == 3 and not running[2].seen and not running[3].seen


@pytest.mark.parametrize(("dialect_pool", "expected"), [(None, "mt"), ("small", "small")])
async def test_other_dialects_go_to_the_default_or_the_configured_pool(
    tmp_path: Path, dialect_pool: str | None, expected: str
) -> None:
    port = free_port()
    cfg = pools_config(port, POOLS, {"nginx.dialect_pool": dialect_pool} if dialect_pool else {})
    with stub_servers(stubs()) as running:
        async with pooled_edge(tmp_path, cfg, running), client(port) as http:
            # Their bodies are never read for a model: a `model` in them changes nothing.
            for path, body in (
                ("/libretranslate/translate", {"q": "hi", "source": "en", "target": "zh", "model": SMALL}),
                ("/v2/translate", {"text": ["hi"], "target_lang": "ZH", "model": CHIMERA}),
                ("/immersive/translate", {"text_list": ["hi"], "target_lang": "zh"}),
            ):
                answer = await http.post(path, json=body)
                assert answer.status_code == 200 and answer.json()["pool"] == expected, (path, answer.text)
            # Our own and OpenAI's other paths stay with the default pool.
            assert (await http.get("/languages")).json()["pool"] == "mt"
            assert (await http.post("/v1/embeddings", json={"model": SMALL})).json()["pool"] == "mt"


async def test_a_body_near_the_limit_is_routed_whole(tmp_path: Path) -> None:
    port = free_port()
    cfg = pools_config(port, POOLS, {"nginx.client_max_body_size": "1m"})
    filler = "\u00e9" * ((1 << 20) // 2 - 200)  # two UTF-8 bytes each: just under 1 MiB in all
    body = json.dumps({"model": SMALL, "messages": [{"role": "user", "content": filler}]}, ensure_ascii=False)
    raw = body.encode()
    assert (1 << 20) - 1024 < len(raw) < 1 << 20
    with stub_servers(stubs()) as running:
        async with pooled_edge(tmp_path, cfg, running), client(port) as http:
            headers = {"content-type": "application/json"}
            answer = await http.post("/v1/chat/completions", content=raw, headers=headers)
            assert answer.status_code == 200 and answer.json()["pool"] == "small", answer.text[:300]
            assert answer.json()["sha256"] == hashlib.sha256(raw).hexdigest()
            # Sent chunked (no Content-Length) too.
            chunked = await http.post("/v1/chat/completions", content=parts(raw), headers=headers)
            assert (
                chunked.json()["sha256"] == hashlib.sha256(raw).hexdigest()
                and chunked.json()["pool"] == "small"
            )
            over = await http.post("/v1/chat/completions", content=raw + b" " * 2048, headers=headers)
            assert over.status_code == 413 and over.json()["error"]["code"] == "body_too_large"


async def parts(raw: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(raw), 64 << 10):
        yield raw[start : start + (64 << 10)]


async def test_pool_route_for_the_replicas_own_calls(tmp_path: Path) -> None:
    port = free_port()
    cfg = pools_config(port, POOLS, {"nginx.listen": "0.0.0.0", "auth.allow_open": True})
    with stub_servers(stubs()) as running:
        async with pooled_edge(tmp_path, cfg, running), client(port) as http:
            fused = await http.post("/_hs/pool/chimera/fuse?x=1", json={"candidates": ["a", "b"]})
            assert fused.status_code == 200 and fused.json()["pool"] == "chimera"
            assert fused.json()["path"] == "/fuse?x=1"  # the prefix cut, the query kept
            assert (await http.get("/_hs/pool/small/v1/models")).json()["pool"] == "small"
            assert (await http.get("/_hs/pool/nope/x")).status_code == 404  # the web root's
    assert all("/_hs/" not in seen["path"] for stub in running for seen in stub.seen)


# From a host of its own (a network namespace on a bridge): the caller's address is not loopback.
OUTSIDE_CALLER = """
import json, sys, httpx
url = sys.argv[1]
fused = httpx.post(url + "/_hs/pool/chimera/fuse", json={}, trust_env=False, timeout=30)
health = httpx.get(url + "/health", trust_env=False, timeout=30)
print(json.dumps([fused.status_code, fused.json(), health.status_code]))
"""


@pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no network namespaces: {UNAVAILABLE}")
async def test_pool_route_refuses_a_caller_from_another_host(tmp_path: Path) -> None:
    port = free_port()
    cfg = pools_config(port, POOLS, {"nginx.listen": "0.0.0.0", "auth.allow_open": True})
    with netns.hosts(["outside"]) as lab, stub_servers(stubs()) as running:
        async with pooled_edge(tmp_path, cfg, running):
            argv = lab.host("outside").argv(
                [sys.executable, "-c", OUTSIDE_CALLER, f"http://{lab.net.addr}:{port}"]
            )
            done = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    status, body, health = json.loads(done.stdout)
    assert status == 403 and body["error"]["message"] == INTERNAL_ONLY, body
    assert health == 200  # the rest of the edge answers that caller
    assert all("/_hs/" not in seen["path"] for stub in running for seen in stub.seen)


async def test_retries_stay_within_the_pool_and_a_pool_without_replicas_is_a_503(tmp_path: Path) -> None:
    port = free_port()
    # mt: one live replica and one listed ready whose port nobody answers; chimera: its one not ready.
    dead = Stub("mt", MT, port=free_port())
    with stub_servers([Stub("mt", MT), Stub("small", SMALL), Stub("chimera", CHIMERA, down=True)]) as running:
        members = [running[0], dead, running[1], running[2]]
        cfg = pools_config(port, POOLS, {"nginx.retry_after_s": 5})
        async with pooled_edge(tmp_path, cfg, members), client(port) as http:
            for _ in range(6):
                answer = await http.post("/translate", json={"text": "a", "target_lang": "zh", "model": MT})
                assert answer.status_code == 200 and answer.json()["pool"] == "mt", answer.text
            body = {"model": CHIMERA, "messages": [{"role": "user", "content": "x"}]}
            busy = await http.post("/v1/chat/completions", json=body)
            assert busy.status_code == 503 and busy.headers["retry-after"] == "5", busy.text
            assert (
                busy.json()["error"]["code"] == "unavailable"
                and busy.json()["error"]["type"] == "server_error"
            )
            health = await http.get("/health")
            assert health.status_code == 200 and health.json()["status"] == "degraded"
    assert not running[2].seen and len(running[0].seen) == 6  # nothing crossed into another pool


async def test_health_names_each_pool(tmp_path: Path) -> None:
    port = free_port()
    with stub_servers(stubs()) as running:
        async with pooled_edge(tmp_path, pools_config(port, POOLS, {}), running), client(port) as http:
            health = (await http.get("/health")).json()
    assert (
        health["status"] == "ready"
        and health["model"] == MT
        and (health["ready"], health["replicas"]) == (4, 4)
    )
    assert health["pools"]["mt"] == {"model": MT, "family": None, "ready": 2, "replicas": 2}
    assert set(health["pools"]) == {"mt", "small", "chimera"}
    assert health["pools"]["small"]["model"] == SMALL


async def test_a_host_behind_a_gateway_asks_every_caller_for_the_peer_secret(tmp_path: Path) -> None:
    port = free_port()
    secret = tmp_path / "peer"
    secret.write_text("peer-secret-0123456789abcdef\n")
    cfg = pools_config(port, POOLS, {"auth.peer_secret_file": str(secret)})
    peer = {"X-Hunyuan-Peer": "peer-secret-0123456789abcdef"}
    with stub_servers(stubs()) as running:
        async with pooled_edge(tmp_path, cfg, running), client(port) as http:
            body = {"model": SMALL, "messages": [{"role": "user", "content": "x"}]}
            refused = await http.post("/v1/chat/completions", json=body)
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "peer_refused"
            routed = await http.post("/v1/chat/completions", json=body, headers=peer)
            assert routed.status_code == 200 and routed.json()["pool"] == "small"
            assert (await http.get("/_hs/pool/chimera/x")).status_code == 403
            assert (await http.get("/_hs/pool/chimera/x", headers=peer)).json()["pool"] == "chimera"
            listing = (await http.get("/_hs/replicas", headers=peer)).json()
            assert listing["pools"] == {"mt": MT, "small": SMALL, "chimera": CHIMERA}
            assert [r["pool"] for r in listing["replicas"]] == ["mt", "mt", "small", "chimera"]


async def test_models_list_with_keys_and_the_default_pool_down_is_openais_503(tmp_path: Path) -> None:
    port = free_port()
    keys = tmp_path / "keys"
    keys.write_text("key-alpha-0123456789\n")
    cfg = pools_config(port, POOLS, {"auth.keys_file": str(keys), "nginx.retry_after_s": 7})
    with stub_servers([Stub("mt", MT, down=True), Stub("small", SMALL), Stub("chimera", CHIMERA)]) as running:
        async with pooled_edge(tmp_path, cfg, running), client(port) as http:
            answer = await http.get("/v1/models", headers={"Authorization": "Bearer key-alpha-0123456789"})
            assert answer.status_code == 503 and answer.headers["retry-after"] == "7", answer.text
            assert (
                answer.json()["error"]["code"] == "unavailable"
                and answer.json()["error"]["type"] == "server_error"
            )
            # The key check's own location is Nginx's alone.
            assert (await http.get("/v1/_hs/models_check")).status_code == 404

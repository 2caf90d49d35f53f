"""The edge against the real Nginx and the real key check: keys, per-key limits, CORS, errors per dialect."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from hunyuan_serve.edge.dialects import REQUEST_HEADERS
from tests.support.edge import KEYS, edge, edge_config, query, upstreams
from tests.support.stacks import free_port

pytestmark = [
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed"),
]

# (path, what each dialect's error body holds its message under)
PATHS = {
    "native": "/translate",
    "openai": "/v1/chat/completions",
    "libretranslate": "/libretranslate/translate",
    "deepl": "/v2/translate",
    "immersive": "/immersive/translate",
}


FORM = {"content-type": "application/x-www-form-urlencoded"}


def message_of(dialect: str, body: dict[str, Any], code: str) -> str:
    """The error's message, asserting the body has exactly the dialect's shape."""
    if dialect in ("native", "immersive"):
        assert set(body) == {"error"} and body["error"]["code"] == code, body
        return str(body["error"]["message"])
    if dialect == "openai":
        assert set(body["error"]) == {"message", "type", "param", "code"}, body  # param: null, as OpenAI's
        assert body["error"]["code"] == code, body
        return str(body["error"]["message"])
    if dialect == "libretranslate":
        assert set(body) == {"error"} and isinstance(body["error"], str), body
        return body["error"]
    assert set(body) == {"message"}, body
    return str(body["message"])


def client(port: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=30)


async def test_errors_nginx_makes_answer_in_each_dialects_shape(tmp_path: Path) -> None:
    port = free_port()
    cfg = edge_config(port, {"nginx.client_max_body_size": "1k", "nginx.retry_after_s": 3})
    async with edge(tmp_path, cfg, [free_port()]), client(port) as http:
        for dialect, path in PATHS.items():
            down = await http.post(path, json={"q": "x"})
            assert down.status_code == 503 and down.headers["retry-after"] == "3", (path, down.text)
            assert "no replica can take this request now" in message_of(dialect, down.json(), "unavailable")
            big = await http.post(path, content=b"x" * 4096, headers={"content-type": "application/json"})
            assert big.status_code == 413, (path, big.text)
            assert "exceeds 1k" in message_of(dialect, big.json(), "body_too_large")
        # Every dialect's prefix reaches the replicas (a dead one here), nothing falls to the web root.
        assert (await http.get("/v1/models")).status_code == 503
        assert (await http.get("/v2/languages?type=target")).status_code == 503


async def test_upstream_timeout_is_a_504_in_the_dialects_shape(tmp_path: Path) -> None:
    port = free_port()
    cfg = edge_config(port, {"nginx.read_timeout_s": 0.3, "nginx.next_upstream_tries": 1})
    with upstreams(1, keys=False) as (_script, ports):
        async with edge(tmp_path, cfg, ports), client(port) as http:
            for dialect in ("deepl", "openai"):
                slow = await http.post(PATHS[dialect].rsplit("/", 1)[0] + "/slow", json={})
                assert slow.status_code == 504, slow.text
                assert "in time" in message_of(dialect, slow.json(), "upstream_timeout")


async def test_keys_through_nginx_each_way_a_client_sends_one(tmp_path: Path) -> None:
    port = free_port()
    cfg = edge_config(port, {"nginx.expose_metrics": True})
    good, wrong = KEYS[0], "not-a-key"
    with upstreams(1, keys=True) as (script, ports):
        async with edge(tmp_path, cfg, ports) as nginx, client(port) as http:
            # Missing and wrong keys, each in its API's statuses and shape.
            expected = {"native": (401, 403), "openai": (401, 401), "libretranslate": (403, 403)}
            expected |= {"deepl": (403, 403), "immersive": (401, 403)}
            for dialect, (missing_status, wrong_status) in expected.items():
                missing = await http.post(PATHS[dialect], json={"q": "x"})
                assert missing.status_code == missing_status, (dialect, missing.text)
                code = "invalid_api_key" if dialect == "openai" else "missing_api_key"
                assert "key" in message_of(dialect, missing.json(), code)
                bad = await http.post(PATHS[dialect], json={}, headers={"Authorization": f"Bearer {wrong}"})
                assert bad.status_code == wrong_status, (dialect, bad.text)
                assert message_of(dialect, bad.json(), "invalid_api_key") == "Invalid API key"
            assert script.seen == []  # no refused request reached the handler
            await _each_way_passes(http, good)
            # /metrics through Nginx needs a key (straight from a replica it does not, for `status`).
            assert (await http.get("/metrics")).status_code == 401
            assert httpx.get(f"http://127.0.0.1:{ports[0]}/metrics", trust_env=False).status_code == 200
            assert (await http.get("/health")).status_code == 200
    # The keys appear nowhere in Nginx's access log (no header logged, $uri without the query).
    log = nginx.access_log.read_text()
    assert good not in log and wrong not in log and '"uri":"/v1/models"' in log


async def _each_way_passes(http: httpx.AsyncClient, key: str) -> None:
    ways: list[tuple[str, dict[str, Any]]] = [
        ("/v1/models", {"headers": {"Authorization": f"Bearer {key}"}}),
        ("/v2/translate", {"headers": {"Authorization": f"DeepL-Auth-Key {key}"}, "json": {"text": ["a"]}}),
        ("/immersive/translate" + query(token=key), {"json": {"text_list": ["a"]}}),
        ("/libretranslate/translate", {"json": {"q": "a", "api_key": key}}),
        ("/libretranslate/translate", {"data": {"q": "a b", "api_key": key}}),
        # libretranslatepy's GET /languages carries its key as a form body.
        ("/libretranslate/languages", {"content": f"api_key={key}".encode(), "headers": FORM}),
    ]
    for path, kwargs in ways:
        method = "GET" if path.endswith(("/models", "/languages")) else "POST"
        answer = await http.request(method, path, **kwargs)
        assert answer.status_code == 200, (path, answer.text)
        echoed = answer.json()
        assert echoed["path"] == path.split("?")[0]
        if "json" in kwargs:  # the body the key check read is the body the handler gets
            assert json.loads(echoed["body"]) == kwargs["json"]
        if "data" in kwargs:
            assert echoed["body"] == httpx.QueryParams(kwargs["data"]).__str__()


async def test_rate_limit_is_per_key_and_speaks_the_dialect(tmp_path: Path) -> None:
    port = free_port()
    cfg = edge_config(port, {"auth.key_rate_limit_rps": 0.1, "auth.key_rate_limit_burst": 0})
    with upstreams(1, keys=False) as (_script, ports):
        async with edge(tmp_path, cfg, ports) as nginx, client(port) as http:
            first, second = KEYS
            bearer = {"Authorization": f"Bearer {first}"}
            assert (await http.get("/v1/models", headers=bearer)).status_code == 200
            limited = await http.get("/v1/models", headers=bearer)
            assert limited.status_code == 429 and limited.headers["retry-after"] == "1"
            message_of("openai", limited.json(), "rate_limited")
            # The same key by DeepL's header or ?token= is the same budget; another key has its own.
            deepl = await http.post("/v2/translate", headers={"Authorization": f"DeepL-Auth-Key {first}"})
            assert deepl.status_code == 429 and "too many" in message_of("deepl", deepl.json(), "")
            assert (await http.post("/immersive/translate" + query(token=first))).status_code == 429
            assert (await http.post("/translate" + query(token=second))).status_code == 200
            # No key: the client's address is the key, with its own budget.
            assert (await http.post("/libretranslate/translate", data={"q": "a"})).status_code == 200
            anon = await http.post("/libretranslate/translate", data={"q": "a"})
            assert anon.status_code == 429 and "too many" in message_of("libretranslate", anon.json(), "")
    # Nginx logs no refusal's request line (it would carry ?token=), nor the key anywhere else.
    logs = "".join(p.read_text() for p in (nginx.prefix / "logs").glob("*.log"))
    assert first not in logs and second not in logs and "limiting requests" not in logs


async def test_cors_preflight_and_headers_for_allowed_origins_only(tmp_path: Path) -> None:
    port = free_port()
    allowed, other = "http://allowed.test:8000", "http://other.test"
    cfg = edge_config(port, {"nginx.cors_origins": allowed, "nginx.cors_max_age_s": 77})
    # What a page sends for interactive work (the README's X-Priority), beside its key.
    asked = "authorization, content-type, x-priority, x-request-id"
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": asked}
    with upstreams(1, keys=True) as (script, ports):
        async with edge(tmp_path, cfg, ports), client(port) as http:
            ok = await http.options("/v1/chat/completions", headers={"Origin": allowed, **preflight})
            assert ok.status_code == 204 and ok.headers["access-control-allow-origin"] == allowed
            assert "POST" in ok.headers["access-control-allow-methods"]
            allowed_headers = [h.strip() for h in ok.headers["access-control-allow-headers"].split(",")]
            assert allowed_headers == list(REQUEST_HEADERS)  # the one list, X-Priority among them
            assert {h.lower() for h in allowed_headers} >= set(asked.split(", "))
            assert ok.headers["access-control-max-age"] == "77" and ok.headers["vary"] == "Origin"
            denied = await http.options("/v1/chat/completions", headers={"Origin": other, **preflight})
            assert denied.status_code == 204 and "access-control-allow-origin" not in denied.headers
            assert script.seen == []  # preflights are Nginx's, without a key
            answer = await http.get(
                "/v1/models", headers={"Origin": allowed, "Authorization": f"Bearer {KEYS[1]}"}
            )
            # Exactly Nginx's header: the upstream's own `*` is hidden.
            assert answer.status_code == 200
            assert answer.headers.get_list("access-control-allow-origin") == [allowed]
            assert "access-control-allow-methods" not in answer.headers
            # Errors carry it too: the app's 401, and Nginx's own 413.
            refused = await http.get("/v2/usage", headers={"Origin": allowed})
            assert refused.status_code == 403 and refused.headers["access-control-allow-origin"] == allowed
            big = await http.post("/v2/translate", content=b"x" * (9 << 20), headers={"Origin": allowed})
            assert big.status_code == 413 and big.headers["access-control-allow-origin"] == allowed
            plain = await http.get("/v1/models", headers={"Origin": other})
            assert "access-control-allow-origin" not in plain.headers


async def test_cors_any_origin_and_none_by_default(tmp_path: Path) -> None:
    for origins, expected in (("*", "*"), ("", None)):
        port = free_port()
        cfg = edge_config(port, {"nginx.cors_origins": origins})
        with upstreams(1, keys=False) as (_script, ports):
            async with edge(tmp_path / ("any" if origins else "none"), cfg, ports), client(port) as http:
                answer = await http.get("/v1/models", headers={"Origin": "http://any.test"})
                assert answer.headers.get("access-control-allow-origin") == expected
                pre = await http.options("/v1/models", headers={"Origin": "http://any.test"})
                # Without CORS, OPTIONS is the app's like any method (the echo answers 200).
                assert pre.status_code == (204 if expected else 200)


async def test_stream_is_not_buffered_and_not_retried_after_its_first_byte(tmp_path: Path) -> None:
    port = free_port()
    cfg = edge_config(port, {})
    with upstreams(2, keys=False) as (script, ports):
        async with edge(tmp_path, cfg, ports), client(port) as http:
            async with http.stream("POST", "/v1/chat/stream", json={}) as events:
                # Nginx consumes the replica's X-Accel-Buffering; proxy_pass_header sends it on.
                assert events.headers.get_list("x-accel-buffering") == ["no"]
                chunks = events.aiter_text()
                # The first event comes through while the upstream still holds the second back.
                # (Bounded: a buffering Nginx would hold it until the upstream's 30 s gate gives way.)
                first = await asyncio.wait_for(anext(chunks), 10)
                assert "data: one" in first and "two" not in first
                script.release.set()
                rest = "".join([chunk async for chunk in chunks])
            assert rest.endswith("data: [DONE]\n\n")
            script.seen.clear()
            # An upstream failing after the first byte: the client sees the cut, no second replica runs it.
            with pytest.raises(httpx.RemoteProtocolError):
                async with http.stream("POST", "/v1/chat/cut", json={}) as cut:
                    async for _ in cut.aiter_text():
                        pass
            assert len(script.seen) == 1

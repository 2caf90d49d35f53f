"""The replica app's own logic over real HTTP with a scripted engine: validation, admission, deadline."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from replica_fakes import FakeEngine, serve_in_thread

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.replica.app import create_app


def make_config(**replica: Any) -> ServeConfig:
    return ServeConfig.model_validate({"replica": {"cache_entries": 100, **replica}})


def wait_ready(client: httpx.Client, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while client.get("/health").status_code != 200:
        if time.monotonic() > deadline:
            raise AssertionError("app never became ready")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeEngine, httpx.Client]]:
    engine = FakeEngine()
    app = create_app(engine, make_config(max_batch_texts=4), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_ready(client)
        yield engine, client


GOOD = {"text": "Hello", "source_lang": "en", "target_lang": "zh"}

BAD_REQUESTS: list[tuple[bytes, int, str]] = [
    (b"\xff\xfe\x00", 400, "invalid_encoding"),
    (b'{"text": "a"', 400, "invalid_json"),
    (b"", 400, "invalid_json"),
    (b"[1, 2]", 422, "invalid_request"),
    (b'"text"', 422, "invalid_request"),
    (json.dumps({**GOOD, "text": ""}).encode(), 422, "empty_text"),
    (json.dumps({**GOOD, "text": " \n\t "}).encode(), 422, "empty_text"),
    (json.dumps({**GOOD, "text": 5}).encode(), 422, "invalid_parameter"),
    (json.dumps({**GOOD, "text": None}).encode(), 422, "invalid_parameter"),
    (json.dumps({"source_lang": "en", "target_lang": "zh"}).encode(), 422, "missing_field"),
    (json.dumps({**GOOD, "texts": ["a"]}).encode(), 422, "missing_field"),
    (json.dumps({"texts": "a", "source_lang": "en", "target_lang": "zh"}).encode(), 422, "invalid_parameter"),
    (json.dumps({"texts": [], "source_lang": "en", "target_lang": "zh"}).encode(), 422, "empty_text"),
    (json.dumps({"texts": ["a", " "], "source_lang": "en", "target_lang": "zh"}).encode(), 422, "empty_text"),
    (
        json.dumps({"texts": ["a", 1], "source_lang": "en", "target_lang": "zh"}).encode(),
        422,
        "invalid_parameter",
    ),
    (
        json.dumps({"texts": ["a"] * 5, "source_lang": "en", "target_lang": "zh"}).encode(),
        413,
        "too_many_texts",
    ),
    (json.dumps({**GOOD, "target_lang": "xx"}).encode(), 400, "unsupported_language"),
    (json.dumps({**GOOD, "source_lang": 7}).encode(), 422, "invalid_parameter"),
    (json.dumps({"text": "a", "target_lang": "zh"}).encode(), 422, "missing_field"),
    (json.dumps({**GOOD, "temperature": 3}).encode(), 422, "invalid_parameter"),
    (json.dumps({**GOOD, "temperature": "hot"}).encode(), 422, "invalid_parameter"),
    (json.dumps({**GOOD, "top_p": 0}).encode(), 422, "invalid_parameter"),
    (json.dumps({**GOOD, "top_k": 0}).encode(), 422, "invalid_parameter"),
    (json.dumps({**GOOD, "top_k": 1.5}).encode(), 422, "invalid_parameter"),
    (json.dumps({**GOOD, "repetition_penalty": True}).encode(), 422, "invalid_parameter"),
    (json.dumps({**GOOD, "max_tokens": 0}).encode(), 422, "invalid_parameter"),
    (json.dumps({**GOOD, "max_tokens": 10**9}).encode(), 422, "invalid_parameter"),
    (
        b'{"text": "a", "source_lang": "en", "target_lang": "zh", "temperature": NaN}',
        422,
        "invalid_parameter",
    ),
    (json.dumps({**GOOD, "text": "a\ud800b"}).encode(), 422, "invalid_text"),
    (json.dumps({**GOOD, "colour": "blue"}).encode(), 422, "unknown_field"),
    (b"[" * 100_000, 400, "invalid_json"),
]


@pytest.mark.parametrize(("body", "status", "code"), BAD_REQUESTS)
def test_bad_input_gets_a_clear_4xx(
    fake: tuple[FakeEngine, httpx.Client], body: bytes, status: int, code: str
) -> None:
    _, client = fake
    response = client.post("/translate", content=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]


def test_text_over_the_token_budget_is_413_naming_the_limit(fake: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = fake
    response = client.post("/translate", json={**GOOD, "text": "x" * 950, "max_tokens": 100})
    assert response.status_code == 413
    message = response.json()["error"]["message"]
    assert "the limit is 900 tokens" in message and "max_model_len 1000" in message
    batch = {"texts": ["ok", "x" * 950], "source_lang": "en", "target_lang": "zh", "max_tokens": 100}
    assert "texts[1]" in client.post("/translate", json=batch).json()["error"]["message"]


def test_translate_and_aliases_and_batch_order(fake: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = fake
    one = client.post(
        "/translate",
        json={"text": "Hi", "src_lang": "EN", "tgt_lang": "zh-CN"},
        headers={"X-Request-ID": "abc-1"},
    )
    assert one.status_code == 200
    body = one.json()
    assert (body["source_lang"], body["target_lang"], body["request_id"]) == ("en", "zh", "abc-1")
    assert body["result"] == f"<{len('把下面的文本翻译成中文，不要额外解释。') + 2 + 2}>"
    assert one.headers["x-request-id"] == "abc-1"
    batch = client.post(
        "/translate", json={"texts": ["a", "bb", "ccc"], "source_lang": "en", "target_lang": "fr"}
    )
    base = len("Translate the following segment into French, without additional explanation.\n\n")
    assert batch.json()["results"] == [f"<{base + 1}>", f"<{base + 2}>", f"<{base + 3}>"]


def test_second_identical_request_is_cached(fake: tuple[FakeEngine, httpx.Client]) -> None:
    engine, client = fake
    request = {**GOOD, "text": "cache me"}
    first = client.post("/translate", json=request).json()
    calls = engine.calls
    second = client.post("/translate", json=request).json()
    assert (first["cached"], second["cached"], second["result"]) == (False, True, first["result"])
    assert engine.calls == calls
    assert 'hunyuan_cache_hits_total{layer="memory"}' in client.get("/metrics").text


def test_unknown_route_is_json_404(fake: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = fake
    response = client.get("/nope")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_languages_lists_38(fake: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = fake
    languages = client.get("/languages").json()["languages"]
    assert len(languages) == 38
    assert languages[0] == {"code": "zh", "name": "Chinese", "native_name": "中文", "chinese_name": "中文"}


def _post_many(url: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    def post(body: dict[str, Any]) -> httpx.Response:
        with httpx.Client(base_url=url, timeout=20) as client:
            return client.post("/translate", json=body)

    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(post, bodies))


def test_admission_past_max_in_flight_is_fast_503_with_retry_after() -> None:
    engine = FakeEngine(delay=1.0)
    app = create_app(engine, make_config(max_in_flight=3, retry_after_s=2), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client, timeout_s=15)
        responses = _post_many(url, [{**GOOD, "text": f"t{i}"} for i in range(6)])
        codes = sorted(r.status_code for r in responses)
        assert codes == [200, 200, 200, 503, 503, 503]
        refused = [r for r in responses if r.status_code == 503]
        assert all(
            r.headers["retry-after"] == "2" and r.json()["error"]["code"] == "overloaded" for r in refused
        )
        assert 'hunyuan_rejections_total{reason="overload"} 3.0' in client.get("/metrics").text


def test_identical_concurrent_requests_share_one_engine_call() -> None:
    engine = FakeEngine(delay=2.0)
    app = create_app(engine, make_config(), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client, timeout_s=15)
        calls = engine.calls
        responses = _post_many(url, [{**GOOD, "text": "same"}] * 5)
        assert [r.status_code for r in responses] == [200] * 5
        assert len({r.json()["result"] for r in responses}) == 1
        assert not any(r.json()["cached"] for r in responses)
        assert engine.calls == calls + 1
        assert "hunyuan_coalesced_total 4.0" in client.get("/metrics").text


def test_deadline_is_504_json_and_aborts_the_engine_request() -> None:
    engine = FakeEngine(delay=5.0)
    app = create_app(engine, make_config(request_timeout_s=0.3, warmup_timeout_s=10), "hunyuan")
    engine.delay = 0.0
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        engine.delay = 5.0
        started = time.monotonic()
        response = client.post("/translate", json=GOOD)
        assert response.status_code == 504
        assert response.json()["error"]["code"] == "deadline_exceeded"
        assert time.monotonic() - started < 3
        assert engine.aborted and not engine.running


def test_client_disconnect_aborts_the_engine_request() -> None:
    engine = FakeEngine()
    app = create_app(engine, make_config(), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        engine.delay = 30.0
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{url}/translate", json={**GOOD, "text": "leave"}, timeout=0.5)
        deadline = time.monotonic() + 5
        while engine.running and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not engine.running and len(engine.aborted) == 1


def test_health_is_503_while_loading_then_200() -> None:
    engine = FakeEngine(start_delay=1.0)
    app = create_app(engine, make_config(), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        loading = client.get("/health")
        assert loading.status_code == 503
        assert loading.json()["status"] == "loading" and "retry-after" in loading.headers
        refused = client.post("/translate", json=GOOD)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "not_ready"
        wait_ready(client)
        assert client.get("/health", params={"deep": "1"}).json()["deep"] is True
        engine.alive = False
        dead = client.get("/health")
        assert dead.status_code == 503 and dead.json()["status"] == "dead"


def test_client_leaving_mid_body_is_499_not_an_error(fake: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = fake
    port = int(str(client.base_url).rsplit(":", 1)[1].strip("/"))
    with socket.create_connection(("127.0.0.1", port)) as sock:
        head = b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
        sock.sendall(head + b'{"text": "par')
    deadline = time.monotonic() + 5
    while 'hunyuan_requests_total{status="499"}' not in client.get("/metrics").text:
        assert time.monotonic() < deadline, "the server never noticed the client leaving"
        time.sleep(0.05)
    assert 'status="503"' not in client.get("/metrics").text

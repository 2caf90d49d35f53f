"""The replica app's own logic over real HTTP with a scripted engine: validation, admission, deadline."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from fastapi.responses import StreamingResponse

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.families import FEW_SHOT, HUNYUAN_MT, HY_MT2, sampling_defaults
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.families.build import canonical_family
from hunyuan_serve.replica.admission.gate import Call
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine.interface import Sampling
from hunyuan_serve.replica.sampling import replica_sampling
from hunyuan_serve.replica.schema import default_max_tokens, parse_sampling
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready, wait_until


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
    # No source_lang is auto-detection now (tests/replica/test_compat_apis.py); no target_lang is not.
    (json.dumps({"text": "a", "source_lang": "en"}).encode(), 422, "missing_field"),
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


# A long text is cut into segments (replica/segmenting.py); a URL is never cut, so one this long is a
# prompt over the budget whole.
LONG_URL = "https://example.com/" + "x" * 930


def test_text_over_the_token_budget_is_413_naming_the_limit(fake: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = fake
    response = client.post("/translate", json={**GOOD, "text": LONG_URL, "max_tokens": 100})
    assert response.status_code == 413
    message = response.json()["error"]["message"]
    assert "the limit is 900 tokens" in message and "max_model_len 1000" in message
    batch = {"texts": ["ok", LONG_URL], "source_lang": "en", "target_lang": "zh", "max_tokens": 100}
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
    wrong_method = client.get("/translate")
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"]["code"] == "method_not_allowed"


def test_languages_lists_38(fake: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = fake
    languages = client.get("/languages").json()["languages"]
    assert len(languages) == 38
    assert languages[0] == {"code": "zh", "name": "Chinese", "native_name": "中文", "chinese_name": "中文"}


def _post(url: str, body: dict[str, Any]) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=20) as client:
        return client.post("/translate", json=body)


def _metric(client: httpx.Client, line: str) -> bool:
    return line in client.get("/metrics").text.splitlines()


def test_admission_past_max_in_flight_and_max_queued_is_fast_503_with_retry_after() -> None:
    engine = FakeEngine()
    # Two run and one waits (here in the fake engine; in vLLM's queue or the bulk gate for real).
    app = create_app(engine, make_config(max_in_flight=2, max_queued=1, retry_after_s=2), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        engine.hold()
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            admitted = [pool.submit(_post, url, {**GOOD, "text": f"t{i}"}) for i in range(3)]
            wait_until(lambda: len(engine.running) == 3, what="three requests in the engine")
            # The one count of requests in flight, as /health and the gauge both report it.
            assert client.get("/health").json()["in_flight"] == 3
            assert _metric(client, "hunyuan_requests_in_flight 3.0")
            refused = [client.post("/translate", json={**GOOD, "text": f"late{i}"}) for i in range(3)]
            engine.let_go()
            answered = [future.result() for future in admitted]
        assert [r.status_code for r in answered] == [200, 200, 200]
        assert [r.status_code for r in refused] == [503, 503, 503]
        assert all(
            r.headers["retry-after"] == "2" and r.json()["error"]["code"] == "overloaded" for r in refused
        )
        assert _metric(client, 'hunyuan_rejections_total{reason="overload"} 3.0')
        assert _metric(client, "hunyuan_requests_in_flight 0.0")


def test_identical_concurrent_requests_share_one_engine_call() -> None:
    engine = FakeEngine()
    app = create_app(engine, make_config(), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        calls = engine.calls
        engine.hold()
        with concurrent.futures.ThreadPoolExecutor(5) as pool:
            pending = [pool.submit(_post, url, {**GOOD, "text": "same"}) for _ in range(5)]
            wait_until(lambda: _metric(client, "hunyuan_coalesced_total 4.0"), what="four requests joining")
            engine.let_go()
            responses = [future.result() for future in pending]
        assert [r.status_code for r in responses] == [200] * 5
        assert len({r.json()["result"] for r in responses}) == 1
        assert not any(r.json()["cached"] for r in responses)
        assert engine.calls == calls + 1


def test_deadline_is_504_json_and_aborts_the_engine_request() -> None:
    engine = FakeEngine()
    app = create_app(engine, make_config(request_timeout_s=0.3), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        finished = list(engine.finished)
        engine.hold()  # the engine never answers: only the deadline can end the request
        response = client.post("/translate", json=GOOD)
        engine.let_go()
        assert response.status_code == 504
        error = response.json()["error"]
        assert error["code"] == "deadline_exceeded" and "request_timeout_s=0.3" in error["message"]
        assert len(engine.aborted) == 1 and not engine.running and engine.finished == finished
        assert _metric(client, 'hunyuan_rejections_total{reason="deadline"} 1.0')


def test_client_disconnect_aborts_the_engine_request() -> None:
    engine = FakeEngine()
    app = create_app(engine, make_config(), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        engine.hold()
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{url}/translate", json={**GOOD, "text": "leave"}, timeout=0.5)
        wait_until(lambda: not engine.running, what="the engine request ending")
        engine.let_go()
        assert len(engine.aborted) == 1
        wait_until(lambda: _metric(client, 'hunyuan_requests_total{status="499"} 1.0'), what="a 499 counted")


def test_health_follows_the_lifecycle_loading_warming_ready_dead() -> None:
    engine = FakeEngine()
    engine.hold_start()
    engine.hold()  # the warm-up generation waits too: the warming phase lasts until let go
    app = create_app(engine, make_config(), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        loading = client.get("/health")
        assert loading.status_code == 503
        assert loading.json() == {"status": "loading", "reason": "model loading"}
        assert "retry-after" in loading.headers
        refused = client.post("/translate", json=GOOD)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "not_ready"
        assert "replica is loading" in refused.json()["error"]["message"]
        engine.let_start()
        wait_until(lambda: client.get("/health").json()["status"] == "warming", what="warming")
        assert client.post("/translate", json=GOOD).json()["error"]["code"] == "not_ready"
        engine.let_go()
        wait_ready(client)
        ready = client.get("/health").json()
        assert ready == {
            "status": "ready",
            "model": "fake",
            "model_path": "/models/fake",  # for operators; clients see the served name
            "family": "hunyuan",
            "in_flight": 0,
            "max_in_flight": ReplicaConfig().max_in_flight,
            "queued": 0,  # sequences waiting in the replica for engine room
            "deep": False,
        }
        assert client.get("/health", params={"deep": "1"}).json()["deep"] is True
        engine.alive = False
        for _ in range(2):  # reading it twice changes nothing: /health only reads
            dead = client.get("/health")
            assert dead.status_code == 503 and dead.json() == {
                "status": "dead",
                "reason": "engine loop stopped",
            }
        engine.alive = True  # a reading, not a stored state: the phase is still ready
        assert client.get("/health").status_code == 200


def test_a_load_failure_is_final_and_reported() -> None:
    engine = FakeEngine(start_error=RuntimeError("no weights"))
    reasons: list[str] = []
    app = create_app(engine, make_config(), "hunyuan", on_fatal=reasons.append)
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_until(lambda: bool(reasons), what="on_fatal called")
        failed = client.get("/health")
        assert failed.status_code == 503
        assert failed.json() == {"status": "failed", "reason": "RuntimeError: no weights"}
        assert reasons == ["RuntimeError: no weights"]
        assert client.post("/translate", json=GOOD).json()["error"]["code"] == "not_ready"


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


# -- which sampling a request gets: its own value, else the config's, else the family's table ----

HUNYUAN = sampling_defaults(HUNYUAN_MT).as_dict()
MOE = sampling_defaults(HY_MT2, "tencent/Hy-MT2-30B-A3B").as_dict()

# (request fields, config fields, family, model) -> the sampling the engine gets (max_tokens aside)
SAMPLING_CASES: dict[str, tuple[dict[str, Any], dict[str, Any], str, str, dict[str, Any]]] = {
    "nothing set: the family's table": ({}, {}, "hunyuan", "m", HUNYUAN),
    "the families package's spelling finds the same row": ({}, {}, HUNYUAN_MT, "m", HUNYUAN),
    "few_shot, today's spelling": ({}, {}, "few_shot", "m", sampling_defaults(FEW_SHOT).as_dict()),
    "a model size with its own row": ({}, {}, HY_MT2, "tencent/Hy-MT2-30B-A3B", MOE),
    "config beats the table, field by field": (
        {},
        {"temperature": 0.2},
        "hunyuan",
        "m",
        {**HUNYUAN, "temperature": 0.2},
    ),
    "config over another row": ({}, {"top_p": 0.9}, HY_MT2, "Hy-MT2-30B", {**MOE, "top_p": 0.9}),
    "request beats config": ({"top_k": 5}, {"top_k": -1}, "hunyuan", "m", {**HUNYUAN, "top_k": 5}),
    "a falsy request value is still the request's": (
        {"temperature": 0},
        {"temperature": 0.2},
        "hunyuan",
        "m",
        {**HUNYUAN, "temperature": 0.0},
    ),
    "null in the request means not sent": ({"repetition_penalty": None}, {}, "hunyuan", "m", HUNYUAN),
    "every field from the request": (
        {"temperature": 1.5, "top_p": 0.5, "top_k": 7, "repetition_penalty": 1.3},
        {"temperature": 0.1, "top_p": 0.2, "top_k": 3, "repetition_penalty": 1.9},
        "hunyuan",
        "m",
        {"temperature": 1.5, "top_p": 0.5, "top_k": 7, "repetition_penalty": 1.3},
    ),
}


def test_both_spellings_of_a_family_name_the_same_table_row() -> None:
    # The table falls back to Hunyuan's row for names it does not know, so the rows above cannot tell.
    # replica_sampling reads it through canonical_family, the one home of the old spellings.
    assert [canonical_family(name) for name in ("hunyuan", "few_shot")] == [HUNYUAN_MT, FEW_SHOT]
    assert replica_sampling(ReplicaConfig(), "few_shot", "m") == sampling_defaults(FEW_SHOT, "m")
    assert replica_sampling(ReplicaConfig(), "hy-mt2", "Hy-MT2-30B-A3B") == sampling_defaults(HY_MT2, "30b")


@pytest.mark.parametrize("name", list(SAMPLING_CASES))
def test_sampling_resolution(name: str) -> None:
    request, config, family, model, expected = SAMPLING_CASES[name]
    cfg = ReplicaConfig.model_validate({**config, "max_tokens": 50})
    sampling = parse_sampling(
        request, replica_sampling(cfg, family, model), cfg.max_tokens, max_model_len=1000
    )
    assert sampling == Sampling(**expected, max_tokens=50)


@pytest.mark.parametrize(
    ("configured", "max_model_len", "expected"),
    [(512, 1024, 512), (512, 512, 256), (100, 512, 100), (512, 3, 1), (512, 2, 1)],
)
def test_the_default_output_budget_leaves_half_the_context_for_the_prompt(
    configured: int, max_model_len: int, expected: int
) -> None:
    assert default_max_tokens(configured, max_model_len) == expected
    asked = parse_sampling(
        {"max_tokens": max_model_len - 1}, sampling_defaults(HUNYUAN_MT, "m"), configured, max_model_len
    )
    assert asked.max_tokens == max_model_len - 1  # asked for, the whole context minus one stays allowed


def test_configured_defaults_reach_the_warm_up_and_every_request() -> None:
    engine = FakeEngine()
    app = create_app(engine, make_config(temperature=0.3, max_tokens=40), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        client.post("/translate", json={**GOOD, "text": "defaults"})
        client.post("/translate", json={**GOOD, "text": "own", "top_k": 3, "max_tokens": 9})
    expected = {**HUNYUAN, "temperature": 0.3}
    warm_up, plain, own = engine.samplings
    assert warm_up == Sampling(**expected, max_tokens=4)
    assert plain == Sampling(**expected, max_tokens=40)
    assert own == Sampling(**{**expected, "top_k": 3}, max_tokens=9)


# -- a streaming route of the kind the next adapters add, through the same gate ------------------


def _streaming_app(engine: FakeEngine) -> FastAPI:
    """Our app plus a test route that streams one chunk, then one chunk per engine generation."""
    app = create_app(engine, make_config(), "hunyuan")
    replica = app.state.replica
    prompt = Prompt(text="stream me")

    async def stream(call: Call) -> Response:
        await call.body()

        async def chunks() -> AsyncIterator[str]:
            yield "start"
            for index in range(2):
                sampling = replica.sampling
                generation = await replica.engine.generate(
                    prompt, Sampling(**sampling.as_dict(), max_tokens=4), f"{call.id}-{index}"
                )
                yield f" {generation.text}"

        return StreamingResponse(chunks(), media_type="text/plain")

    async def route(request: Request) -> Response:
        return await replica.gate.serve(request, stream)

    app.add_api_route("/test-stream", route, methods=["POST"])
    return app


def test_a_stream_holds_its_place_until_its_last_chunk_and_is_logged_once() -> None:
    engine = FakeEngine()
    with serve_in_thread(_streaming_app(engine)) as url, httpx.Client(base_url=url, timeout=20) as client:
        wait_ready(client)
        engine.hold()
        with client.stream("POST", "/test-stream", content=b"{}") as response:
            chunks = response.iter_text()
            assert next(chunks) == "start"
            wait_until(lambda: len(engine.running) == 1, what="the stream's generation running")
            assert (
                client.get("/health").json()["in_flight"] == 1
            )  # the answer has begun, the request has not ended
            assert not _metric(client, 'hunyuan_requests_total{status="200"} 1.0')
            engine.let_go()
            rest = "".join(chunks)
        assert rest == " <9> <9>"
        # The server counts the request once its last chunk is written, which the client can read
        # a moment before that bookkeeping runs: waited for (bounded), not raced.
        wait_until(
            lambda: _metric(client, 'hunyuan_requests_total{status="200"} 1.0'), what="the 200 counted"
        )
        assert _metric(client, "hunyuan_requests_in_flight 0.0")


def test_a_client_leaving_mid_stream_is_499_and_aborts_the_generation() -> None:
    engine = FakeEngine()
    with serve_in_thread(_streaming_app(engine)) as url, httpx.Client(base_url=url, timeout=20) as client:
        wait_ready(client)
        engine.hold()
        with (
            httpx.Client(base_url=url, timeout=20) as leaving,
            leaving.stream("POST", "/test-stream", content=b"{}") as response,
        ):
            chunks = response.iter_text()  # kept: a dropped iterator closes the connection at once
            assert next(chunks) == "start"
            wait_until(lambda: len(engine.running) == 1, what="the stream's generation running")
        # Closed before the end: the server sees the disconnect and ends the stream.
        wait_until(lambda: _metric(client, 'hunyuan_requests_total{status="499"} 1.0'), what="a 499 counted")
        assert len(engine.aborted) == 1 and not engine.running
        assert client.get("/health").json()["in_flight"] == 0
        engine.let_go()

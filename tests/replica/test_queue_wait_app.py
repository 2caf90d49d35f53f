"""The replica's queue over real HTTP with a scripted engine: a burst waits, a wait past the bound is a
fast 503 with Retry-After in each API's shape."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterator

import httpx

from hunyuan_serve.replica.admission.queue_wait import MIN_GAPS
from hunyuan_serve.replica.app import create_app
from tests.api.test_edge import PATHS, message_of
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready, wait_until

GOOD = {"text": "Hello", "source_lang": "en", "target_lang": "zh"}
BURST = MIN_GAPS + 4  # past two places: enough answers with every place taken to learn the rate


def _post(url: str, text: str) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=20) as client:
        return client.post("/translate", json={**GOOD, "text": text})


def test_a_burst_waits_then_a_wait_past_the_bound_is_refused_in_each_shape() -> None:
    engine = FakeEngine()
    # Any wait at all is past this bound, once the rate is known: the first burst, at an unknown rate,
    # still waits whole.
    cfg = make_config(max_in_flight=2, max_queued=50, max_queue_wait_s=1e-9, queue_rate_window_s=600)
    app = create_app(engine, cfg, "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        engine.hold()
        with concurrent.futures.ThreadPoolExecutor(BURST) as pool:
            burst = [pool.submit(_post, url, f"b{i}") for i in range(BURST)]
            wait_until(lambda: len(engine.running) == BURST, what="the whole burst admitted")
            assert client.get("/health").json()["in_flight"] == BURST
            engine.let_go()
            assert [f.result().status_code for f in burst] == [200] * BURST
        engine.hold()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            running = [pool.submit(_post, url, f"r{i}") for i in range(2)]
            wait_until(lambda: len(engine.running) == 2, what="both places taken")
            refused = {dialect: client.post(path, json={}) for dialect, path in PATHS.items()}
            engine.let_go()
            assert [f.result().status_code for f in running] == [200] * 2
        for dialect, response in refused.items():
            assert response.status_code == 503 and response.headers["retry-after"] == "1", response.text
            assert "max_queue_wait_s" in message_of(dialect, response.json(), "overloaded")
        metrics = client.get("/metrics").text.splitlines()
        assert f'hunyuan_rejections_total{{reason="overload"}} {len(PATHS)}.0' in metrics


def test_a_request_to_be_refused_is_refused_before_the_intake_line_in_each_shape() -> None:
    # One taken in at a time and one place, no queue: the first request, its body still being sent,
    # holds both (admitted, it is being taken in until its engine call).
    cfg = make_config(max_in_flight=1, max_queued=0, intake_limit=1)
    app = create_app(FakeEngine(), cfg, "hunyuan")
    rest = threading.Event()

    def body() -> Iterator[bytes]:
        yield b'{"text": "first", '
        rest.wait(20)
        yield b'"source_lang": "en", "target_lang": "zh"}'

    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=20) as client:
        wait_ready(client)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            first = pool.submit(client.post, "/translate", content=body())
            wait_until(lambda: client.get("/health").json()["in_flight"] == 1, what="the first taken in")
            # Each answered while the first holds the intake's one place: judged before the line.
            refused = {dialect: client.post(path, json={}) for dialect, path in PATHS.items()}
            assert not first.done()
            rest.set()
            assert first.result().status_code == 200
        for dialect, response in refused.items():
            assert response.status_code == 503 and response.headers["retry-after"] == "1", response.text
            message = message_of(dialect, response.json(), "overloaded")
            assert "1 requests in flight and 0 being taken in ahead: max_in_flight=1" in message, message
        assert _post(url, "after").status_code == 200  # nothing was left holding a place

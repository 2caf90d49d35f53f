"""The replica's queue over real HTTP with a scripted engine: a burst waits, a wait past the bound is a
fast 503 with Retry-After in each API's shape."""

from __future__ import annotations

import concurrent.futures

import httpx
from replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready, wait_until

from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.queue_wait import MIN_GAPS
from tests.api.test_edge import PATHS, message_of

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

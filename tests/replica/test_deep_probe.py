"""A deep probe of a busy engine reads its steps (the stall clock) instead of queueing a token behind them."""

from __future__ import annotations

import threading

import httpx

from hunyuan_serve.families import HUNYUAN_MT
from hunyuan_serve.replica.app import create_app
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready, wait_until


def test_a_deep_probe_of_a_busy_engine_reads_its_steps_instead_of_queueing_a_token() -> None:
    engine = FakeEngine()
    config = make_config(health_deep_timeout_s=0.5)
    with (
        serve_in_thread(create_app(engine, config, HUNYUAN_MT)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        wait_ready(client)
        engine.hold()  # the work below, and any probe's token, wait as behind a long prefill
        body = {"text": "Open the file.", "source_lang": "en", "target_lang": "zh"}
        work = threading.Thread(target=lambda: client.post("/translate", json=body), daemon=True)
        work.start()
        try:
            wait_until(lambda: bool(engine.running), what="the work in the engine")
            deep = client.get("/health", params={"deep": "1"})
            assert deep.status_code == 200, deep.text
            assert deep.json()["in_flight"] == 1 and len(engine.running) == 1  # no probe generation
        finally:
            engine.let_go()
            work.join(30)
        idle = client.get("/health", params={"deep": "1"})
        assert idle.status_code == 200 and idle.json()["deep"] is True

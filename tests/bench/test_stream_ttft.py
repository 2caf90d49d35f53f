"""The streaming bench driver against the replica app on a scripted engine: it reads OpenAI's SSE shapes."""

from __future__ import annotations

import asyncio

import httpx

from bench.stream_ttft import HEADER, chat_body, measure, percentile, texts
from hunyuan_serve.replica.app import create_app
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready


def test_percentile_interpolates() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([7.0], 95) == 7.0
    assert percentile([float(v) for v in range(1, 101)], 50) == 50.5
    assert percentile([float(v) for v in range(1, 101)], 95) == 95.05


def test_measure_counts_first_tokens_usage_and_failures() -> None:
    engine = FakeEngine()
    with (
        serve_in_thread(create_app(engine, make_config(), "hunyuan")) as url,
        httpx.Client(base_url=url) as c,
    ):
        wait_ready(c)
        bodies = [chat_body("fake", text, {"temperature": 0.7}, 8) for text in texts(6)]
        figures = asyncio.run(measure(url, bodies, 3))
        refused = asyncio.run(measure(url, [chat_body("other-model", "abc", {}, 8)] * 2, 2))
    assert (figures.requests, figures.failed, figures.tokens) == (6, 0, 12)  # two tokens per scripted stream
    assert 0 < figures.ttft_p50_ms <= figures.ttft_p95_ms
    assert engine.streams == 6 and figures.tokens_per_s > 0
    assert (refused.failed, refused.tokens) == (2, 0)
    assert figures.row("stack").count("|") == HEADER.splitlines()[0].count("|")

"""The clients against a real local HTTP server: retries, Retry-After, errors, batches, concurrency."""

from __future__ import annotations

import socket
import time

import pytest
from scripted_service import Reply, ScriptedService

from hunyuan_serve.client import AsyncTranslateClient, ClientSettings, TranslateClient, TranslateError

BUSY = Reply(503, {"error": {"code": "overloaded", "message": "busy"}}, {"Retry-After": "1"})


def fast(url: str, **kw: object) -> ClientSettings:
    """Settings whose own backoff is tiny, so any wait measured comes from Retry-After."""
    values: dict[str, object] = {"base_url": url, "backoff_base_s": 0.01, "backoff_max_s": 0.05}
    values.update(kw)
    return ClientSettings.model_validate(values)


def test_sync_client_waits_retry_after_then_succeeds(service: ScriptedService) -> None:
    service.state.script.append(BUSY)
    with TranslateClient(fast(service.url)) as client:
        result = client.translate("Hello", "zh", "en")
    assert result.result == "[zh] Hello"
    assert len(service.state.requests) == 2
    gap = service.state.times[1] - service.state.times[0]
    assert gap >= 1.0, f"retried after {gap:.2f}s, before Retry-After: 1"
    assert service.state.requests[0] == {"text": "Hello", "target_lang": "zh", "source_lang": "en"}


async def test_async_client_waits_retry_after_then_succeeds(service: ScriptedService) -> None:
    service.state.script.extend([BUSY, BUSY])
    retries: list[tuple[int, float, int | None]] = []
    settings = fast(service.url)
    async with AsyncTranslateClient(
        settings, on_retry=lambda a, d, e: retries.append((a, d, e.status))
    ) as client:
        result = await client.translate("Hello", "fr")
    assert result.result == "[fr] Hello"
    assert [r[0] for r in retries] == [1, 2]
    assert all(status == 503 and delay >= 1.0 for _, delay, status in retries)
    assert service.state.times[2] - service.state.times[1] >= 1.0


@pytest.mark.parametrize("status", [429, 502, 504])
def test_other_retryable_statuses_back_off(service: ScriptedService, status: int) -> None:
    service.state.script.append(Reply(status, {"error": {"code": "x", "message": "y"}}))
    with TranslateClient(fast(service.url)) as client:
        assert client.translate("Hi", "zh").result == "[zh] Hi"
    assert len(service.state.requests) == 2


def test_dropped_connection_is_retried(service: ScriptedService) -> None:
    service.state.script.append(Reply(0, drop=True))
    with TranslateClient(fast(service.url)) as client:
        assert client.translate("Hi", "zh").result == "[zh] Hi"
    assert len(service.state.requests) == 2


def test_bad_request_is_not_retried_and_names_the_problem(service: ScriptedService) -> None:
    with TranslateClient(fast(service.url)) as client, pytest.raises(TranslateError) as info:
        client.translate("Hi", "xx")
    assert (info.value.status, info.value.code) == (400, "unsupported_language")
    assert "xx" in info.value.message
    assert len(service.state.requests) == 1


async def test_retries_are_bounded(service: ScriptedService) -> None:
    service.state.script.extend([Reply(503, {"error": {"code": "overloaded", "message": "busy"}})] * 5)
    async with AsyncTranslateClient(fast(service.url, max_retries=2)) as client:
        with pytest.raises(TranslateError) as info:
            await client.translate("Hi", "zh")
    assert info.value.status == 503
    assert len(service.state.requests) == 3


def test_unreachable_service_raises_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        with TranslateClient(fast(f"http://127.0.0.1:{port}", max_retries=2)) as client:
            start = time.monotonic()
            with pytest.raises(TranslateError) as info:
                client.translate("Hi", "zh")
    assert info.value.status is None and info.value.code == "connection_error"
    assert time.monotonic() - start < 5


def test_sync_batch_keeps_order_reports_progress_and_bounds_concurrency(service: ScriptedService) -> None:
    service.state.delay_s = 0.05
    texts = [f"text {i}" for i in range(50)]
    progress: list[tuple[int, int]] = []
    with TranslateClient(fast(service.url, batch_size=8, concurrency=3)) as client:
        results = client.translate_batch(texts, "zh", progress=lambda d, t: progress.append((d, t)))
    assert [r.result for r in results] == [f"[zh] {t}" for t in texts]
    assert len(service.state.requests) == 7
    assert all(len(body["texts"]) <= 8 for body in service.state.requests)
    assert [d for d, _ in progress] == sorted(d for d, _ in progress) and progress[-1] == (50, 50)
    assert 1 <= service.state.max_in_flight <= 3


async def test_async_batch_keeps_order_and_bounds_concurrency(service: ScriptedService) -> None:
    service.state.delay_s = 0.05
    texts = [f"line {i}" for i in range(40)]
    async with AsyncTranslateClient(fast(service.url, batch_size=4, concurrency=2)) as client:
        results = await client.translate_batch(texts, "zh", "en")
    assert [r.text for r in results] == texts
    assert [r.result for r in results] == [f"[zh] {t}" for t in texts]
    assert len(service.state.requests) == 10
    assert 1 <= service.state.max_in_flight <= 2


async def test_batch_retries_one_busy_batch_only(service: ScriptedService) -> None:
    service.state.script.append(BUSY)
    async with AsyncTranslateClient(fast(service.url, batch_size=5, concurrency=1)) as client:
        results = await client.translate_batch([str(i) for i in range(10)], "zh")
    assert len(results) == 10
    assert len(service.state.requests) == 3  # first batch twice, second once


async def test_languages(service: ScriptedService) -> None:
    async with AsyncTranslateClient(fast(service.url)) as client:
        languages = await client.languages()
    assert ("zh", "中文") in [(lang.code, lang.native_name) for lang in languages]

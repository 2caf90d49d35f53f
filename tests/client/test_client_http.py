"""The one client implementation against a real local HTTP server, and the sync facade's parity with it."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest

from hunyuan_serve.client import AsyncTranslateClient, ClientSettings, TranslateClient, TranslateError
from tests.support.scripted_service import Reply, ScriptedService

BUSY = Reply(503, {"error": {"code": "overloaded", "message": "busy"}}, {"Retry-After": "7"})
BUSY_NO_HINT = Reply(503, {"error": {"code": "overloaded", "message": "busy"}})


class Sleeps:
    """An injected sleep: records each delay asked for and returns at once, so no test waits or times."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def settings(url: str, **kw: object) -> ClientSettings:
    return ClientSettings.model_validate({"base_url": url, **kw})


def client(
    service: ScriptedService, sleeps: Sleeps, rand: float = 0.0, **kw: object
) -> tuple[AsyncTranslateClient, list[tuple[int, float, int | None]]]:
    """An async client on the scripted service with a fixed jitter draw, and the retries it reports."""
    retries: list[tuple[int, float, int | None]] = []
    made = AsyncTranslateClient(
        settings(service.url, **kw),
        on_retry=lambda attempt, delay, err: retries.append((attempt, delay, err.status)),
        rand=lambda: rand,
        sleep=sleeps,
    )
    return made, retries


async def test_retry_after_is_honoured_over_a_shorter_backoff(service: ScriptedService) -> None:
    service.state.script.append(BUSY)
    sleeps = Sleeps()
    made, retries = client(service, sleeps)
    async with made:
        result = await made.translate("Hello", "zh", "en")
    assert result.result == "[zh] Hello"
    assert sleeps.delays == [7.0]  # Retry-After: 7 wins over the first backoff of 0.5 s
    assert retries == [(1, 7.0, 503)]
    assert service.state.requests == [{"text": "Hello", "target_lang": "zh", "source_lang": "en"}] * 2


async def test_backoff_doubles_and_adds_jitter(service: ScriptedService) -> None:
    service.state.script.extend([BUSY_NO_HINT] * 3)
    sleeps = Sleeps()
    made, retries = client(service, sleeps, rand=0.5, backoff_base_s=0.5, backoff_jitter=0.5)
    async with made:
        assert (await made.translate("Hi", "fr")).result == "[fr] Hi"
    # 0.5, 1, 2 s of backoff, each plus half of the jitter fraction (rand 0.5 x 0.5).
    assert sleeps.delays == [0.625, 1.25, 2.5]
    assert [attempt for attempt, _, _ in retries] == [1, 2, 3]
    assert len(service.state.requests) == 4


async def test_a_long_retry_after_is_capped(service: ScriptedService) -> None:
    service.state.script.append(Reply(429, {"error": {"code": "x", "message": "y"}}, {"Retry-After": "900"}))
    sleeps = Sleeps()
    made, _ = client(service, sleeps, retry_after_max_s=60)
    async with made:
        await made.translate("Hi", "zh")
    assert sleeps.delays == [60.0]


@pytest.mark.parametrize(
    "reply",
    [
        Reply(429, {"error": {"code": "x", "message": "y"}}),
        Reply(502, "bad gateway"),
        Reply(503, {"error": {"code": "x", "message": "y"}}),
        Reply(504, {"error": {"code": "x", "message": "y"}}),
        Reply(0, drop=True),
    ],
    ids=["429", "502", "503", "504", "dropped connection"],
)
async def test_overload_and_connection_failures_are_retried(service: ScriptedService, reply: Reply) -> None:
    service.state.script.append(reply)
    sleeps = Sleeps()
    made, _ = client(service, sleeps)
    async with made:
        assert (await made.translate("Hi", "zh")).result == "[zh] Hi"
    assert len(service.state.requests) == 2 and sleeps.delays == [0.5]


@pytest.mark.parametrize(
    ("reply", "status", "code", "message"),
    [
        # The stand-in's own answer to target 'xx'.
        (None, 400, "unsupported_language", "unsupported language 'xx'; supported: en, zh, fr"),
        (
            Reply(413, {"error": {"code": "too_long", "message": "text too long"}}),
            413,
            "too_long",
            "text too long",
        ),
        (Reply(500, {"detail": "boom"}), 500, "http_error", "boom"),
    ],
)
async def test_other_failures_are_final_and_named(
    service: ScriptedService, reply: Reply | None, status: int, code: str, message: str
) -> None:
    if reply is not None:
        service.state.script.append(reply)
    sleeps = Sleeps()
    made, _ = client(service, sleeps)
    async with made:
        with pytest.raises(TranslateError) as info:
            await made.translate("Hi", "xx")
    assert (info.value.status, info.value.code, info.value.message) == (status, code, message)
    assert len(service.state.requests) == 1 and sleeps.delays == []


def _refusal(status: int, code: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"error": {"code": code, "message": f"refused: {code}"}}, headers or {})


@pytest.mark.parametrize(
    "reply",
    [
        # A quota is not relieved by waiting: final although 429 is retried, even with a Retry-After.
        _refusal(429, "quota_exceeded"),
        _refusal(429, "quota_exceeded", {"Retry-After": "1"}),
        # An address slowed for wrong keys: after the pause the same key gets its 403.
        _refusal(429, "too_many_bad_keys", {"Retry-After": "47"}),
        _refusal(401, "missing_api_key"),
        _refusal(403, "invalid_api_key"),
        _refusal(404, "not_found"),
        _refusal(422, "unknown_field"),
    ],
    ids=["quota", "quota-retry-after", "bad-keys", "401", "403", "404", "422"],
)
async def test_refusals_that_waiting_does_not_cure_are_final(service: ScriptedService, reply: Reply) -> None:
    service.state.script.append(reply)
    sleeps = Sleeps()
    made, retries = client(service, sleeps)  # the default max_retries (6)
    async with made:
        with pytest.raises(TranslateError) as info:
            await made.translate("Hi", "zh")
    assert (info.value.status, info.value.code) == (reply.status, reply.body["error"]["code"])
    assert len(service.state.requests) == 1 and sleeps.delays == [] and retries == []


def test_a_4xx_waiting_does_not_cure_cannot_be_made_retried() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="401, 404: a refusal that waiting does not cure"):
        ClientSettings(retry_statuses=(401, 404, 429, 503))
    assert ClientSettings(retry_statuses=(408, 429, 500)).retry_statuses == (408, 429, 500)


def test_the_final_codes_name_the_services_quota_refusal() -> None:
    from hunyuan_serve.client.settings import FINAL_CODES
    from hunyuan_serve.replica.usage import QUOTA_EXCEEDED

    assert QUOTA_EXCEEDED in FINAL_CODES  # the code the replica's usage check refuses with


async def test_retries_are_bounded(service: ScriptedService) -> None:
    service.state.script.extend([BUSY_NO_HINT] * 5)
    sleeps = Sleeps()
    made, _ = client(service, sleeps, max_retries=2)
    async with made:
        with pytest.raises(TranslateError) as info:
            await made.translate("Hi", "zh")
    assert (info.value.status, info.value.code) == (503, "overloaded")
    assert len(service.state.requests) == 3 and sleeps.delays == [0.5, 1.0]


async def test_unreachable_service_is_retried_then_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        sleeps = Sleeps()
        made = AsyncTranslateClient(
            settings(f"http://127.0.0.1:{sock.getsockname()[1]}", max_retries=3),
            rand=lambda: 0.0,
            sleep=sleeps,
        )
        async with made:
            with pytest.raises(TranslateError) as info:
                await made.translate("Hi", "zh")
    assert (info.value.status, info.value.code) == (None, "connection_error")
    assert sleeps.delays == [0.5, 1.0, 2.0]


async def test_batches_keep_order_and_report_progress(service: ScriptedService) -> None:
    texts = [f"text {i}" for i in range(50)]
    progress: list[tuple[int, int]] = []
    made, _ = client(service, Sleeps(), batch_size=8, concurrency=3)
    async with made:
        results = await made.translate_batch(texts, "zh", progress=lambda d, t: progress.append((d, t)))
    assert [(r.text, r.result) for r in results] == [(t, f"[zh] {t}") for t in texts]
    assert sorted(len(body["texts"]) for body in service.state.requests) == [2, 8, 8, 8, 8, 8, 8]
    dones = [done for done, _ in progress]
    steps = [after - before for before, after in zip([0, *dones], dones, strict=False)]
    assert sorted(steps) == [2, 8, 8, 8, 8, 8, 8]  # one report per batch, counting its texts
    assert progress[-1] == (50, 50) and all(total == 50 for _, total in progress)


async def test_batches_in_flight_are_bounded_by_concurrency(service: ScriptedService) -> None:
    # The stand-in holds requests until three are in flight, so a bound of three is reached exactly;
    # a client sending all seven batches at once would push the count past it.
    service.state.hold = 3
    service.state.delay_s = 0.05
    made, _ = client(service, Sleeps(), batch_size=2, concurrency=3)
    async with made:
        results = await made.translate_batch([str(i) for i in range(14)], "zh")
    assert len(results) == 14 and len(service.state.requests) == 7
    assert service.state.max_in_flight == 3


@pytest.mark.parametrize(("extra", "most"), [({}, 6), ({"max_connections": 4}, 4), ({"concurrency": 2}, 2)])
async def test_the_client_widens_to_what_the_service_says_it_batches(
    service: ScriptedService, extra: dict[str, object], most: int
) -> None:
    # Nginx says 12 texts: batches of 2, six at once; the first request goes out alone (start 1).
    # Each answer waits 0.3 s, so the six the width lets in are all in flight together.
    service.state.headers = {"X-Hunyuan-Bulk-Texts": "12"}
    service.state.delay_s = 0.3
    made, _ = client(service, Sleeps(), batch_size=2, start_concurrency=1, **extra)
    async with made:
        results = await made.translate_batch([str(i) for i in range(30)], "zh")
    assert [r.result for r in results] == [f"[zh] {i}" for i in range(30)]
    assert service.state.max_in_flight == most
    first, second = sorted(service.state.times)[:2]
    assert most == 2 or second - first >= 0.25  # alone until the service had said


async def test_without_the_header_the_client_keeps_its_start_width(service: ScriptedService) -> None:
    service.state.delay_s = 0.1
    made, _ = client(service, Sleeps(), batch_size=2, start_concurrency=3)
    async with made:
        await made.translate_batch([str(i) for i in range(20)], "zh")
    assert service.state.max_in_flight == 3


async def test_requests_in_flight_are_bounded_by_concurrency(service: ScriptedService) -> None:
    service.state.hold = 3
    service.state.delay_s = 0.05
    made, _ = client(service, Sleeps(), concurrency=3)
    async with made:
        results = await asyncio.gather(*(made.translate(str(i), "zh") for i in range(8)))
    assert [r.result for r in results] == [f"[zh] {i}" for i in range(8)]
    assert service.state.max_in_flight == 3


async def test_a_busy_batch_is_retried_alone(service: ScriptedService) -> None:
    service.state.script.append(BUSY)
    sleeps = Sleeps()
    made, _ = client(service, sleeps, batch_size=5, concurrency=1)
    async with made:
        results = await made.translate_batch([str(i) for i in range(10)], "zh")
    assert [r.result for r in results] == [f"[zh] {i}" for i in range(10)]
    assert [body["texts"] for body in service.state.requests] == [["0", "1", "2", "3", "4"]] * 2 + [
        ["5", "6", "7", "8", "9"]
    ]
    assert sleeps.delays == [7.0]


async def test_a_refused_batch_stops_the_batches_not_yet_sent(service: ScriptedService) -> None:
    service.state.script.append(Reply(413, {"error": {"code": "too_long", "message": "text too long"}}))
    made, _ = client(service, Sleeps(), batch_size=2, concurrency=1)
    async with made:
        with pytest.raises(TranslateError) as info:
            await made.translate_batch([str(i) for i in range(6)], "zh")
    assert info.value.code == "too_long"
    assert len(service.state.requests) == 1


async def test_map_batches_bounds_the_work_in_progress_and_keeps_batch_order() -> None:
    # Pure logic (no request is sent): later batches finish first, yet results come back in order.
    running, most = 0, 0

    async def work(batch: list[str]) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        for _ in range(20 - (ord(batch[0]) - ord("a"))):
            await asyncio.sleep(0)
        running -= 1
        return "".join(batch)

    async with AsyncTranslateClient(settings("http://127.0.0.1:9", batch_size=2, concurrency=3)) as made:
        assert await made.map_batches(list("abcdefghijk"), work) == ["ab", "cd", "ef", "gh", "ij", "k"]
    assert most == 3


@pytest.mark.timeout(30)  # a batch not cancelled would sleep on: fail then instead of after 10 minutes
async def test_map_batches_raises_the_first_failure_and_cancels_the_rest() -> None:
    started: list[str] = []
    cancelled: list[str] = []

    async def work(batch: list[str]) -> None:
        started.append(batch[0])
        try:
            if batch[0] == "b":
                raise TranslateError(503, "overloaded", "busy")
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(batch[0])
            raise

    async with AsyncTranslateClient(settings("http://127.0.0.1:9", batch_size=1, concurrency=2)) as made:
        with pytest.raises(TranslateError, match="busy"):
            await made.map_batches(list("abcd"), work)
    assert started == ["a", "b"] and cancelled == ["a"]


@pytest.mark.parametrize(
    ("glossary", "sent"),
    [
        ({"Train": "训练"}, {"Train": "训练"}),
        ([{"source": "Train", "target": "训练"}], [{"source": "Train", "target": "训练"}]),
    ],
    ids=["object", "list"],
)
async def test_instruction_fields_are_sent_only_when_given(
    service: ScriptedService, glossary: Any, sent: Any
) -> None:
    made, _ = client(service, Sleeps(), batch_size=2)
    async with made:
        await made.translate("Train it", "zh", glossary=glossary, context="A model trainer.", style="formal")
        await made.translate_batch(["a", "b", "c"], "zh", context="Menu", style="", glossary={})
        await made.translate_texts(["d"], "zh", glossary=glossary)
        await made.translate("e", "zh")
    fields = [
        {k: v for k, v in body.items() if k in ("glossary", "context", "style")}
        for body in service.state.requests
    ]
    assert fields == [
        {"glossary": sent, "context": "A model trainer.", "style": "formal"},
        {"context": "Menu"},  # an empty style or glossary is not sent
        {"context": "Menu"},
        {"glossary": sent},
        {},
    ]


# The sync facade: each scenario run through both clients must give the same results, errors,
# requests and retry delays.
Call = Callable[[Any, list[tuple[int, int]]], Any]
SCENARIOS: dict[str, tuple[list[Reply], dict[str, object], str, Call]] = {
    "retried translate": ([BUSY], {}, "translate", lambda c, p: c.translate("Hello", "zh", "en")),
    "refused": ([], {}, "translate", lambda c, p: c.translate("Hi", "xx", None, {"max_tokens": 1})),
    "retries spent": (
        [BUSY_NO_HINT] * 3,
        {"max_retries": 2},
        "translate",
        lambda c, p: c.translate("Hi", "zh"),
    ),
    "texts": ([], {}, "translate_texts", lambda c, p: c.translate_texts(["a", "b"], "fr", "en")),
    "batch": (
        [BUSY],
        {"batch_size": 3, "concurrency": 1},
        "translate_batch",
        lambda c, p: c.translate_batch(list("abcdefg"), "fr", progress=lambda d, t: p.append((d, t))),
    ),
    "instructions": (
        [],
        {},
        "translate",
        lambda c, p: c.translate(
            "Hi", "zh", glossary=[{"source": "Hi", "target": "嗨"}], context="x", style="y"
        ),
    ),
    "languages": ([], {}, "languages", lambda c, p: c.languages()),
    "health": ([], {}, "health", lambda c, p: c.health()),
}


def _outcome(run: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", run()
    except TranslateError as err:
        return "error", (type(err), err.status, err.code, err.message, err.retry_after, str(err))


def _run_async(service: ScriptedService, name: str) -> tuple[Any, ...]:
    script, kw, _, call = SCENARIOS[name]
    service.state.reset()
    service.state.script.extend(script)
    sleeps, progress = Sleeps(), []

    async def main() -> Any:
        async with AsyncTranslateClient(settings(service.url, **kw), rand=lambda: 0.0, sleep=sleeps) as made:
            return await call(made, progress)

    outcome = _outcome(lambda: asyncio.run(main()))
    return outcome, list(service.state.requests), sleeps.delays, progress


def _run_sync(service: ScriptedService, name: str) -> tuple[Any, ...]:
    script, kw, _, call = SCENARIOS[name]
    service.state.reset()
    service.state.script.extend(script)
    sleeps, progress = Sleeps(), []
    with TranslateClient(settings(service.url, **kw), rand=lambda: 0.0, sleep=sleeps) as made:
        outcome = _outcome(lambda: call(made, progress))
    return outcome, list(service.state.requests), sleeps.delays, progress


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_sync_client_gives_what_the_async_client_gives(service: ScriptedService, name: str) -> None:
    expected = _run_async(service, name)
    assert _run_sync(service, name) == expected
    assert expected[0][0] == ("error" if name in ("refused", "retries spent") else "ok")


def test_sync_client_is_shared_between_threads_and_stops_its_loop(service: ScriptedService) -> None:
    results: dict[int, str] = {}
    with TranslateClient(settings(service.url, concurrency=2)) as made:

        def work(i: int) -> None:
            results[i] = made.translate(f"text {i}", "zh").result

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert results == {i: f"[zh] text {i}" for i in range(6)}
    assert "hunyuan-serve-client" not in [thread.name for thread in threading.enumerate()]
    made.close()  # a second close is harmless

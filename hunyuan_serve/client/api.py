"""The service's HTTP clients: one async implementation (pooled, retrying, batching) and a sync facade."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from hunyuan_serve.client.settings import FINAL_CODES, ClientSettings, parse_retry_after, retry_delay
from hunyuan_serve.client.width import (
    BULK_TEXTS_HEADER,
    Width,
    most_in_flight,
    parse_bulk_texts,
    requests_in_flight,
)

T = TypeVar("T")
Progress = Callable[[int, int], None]  # (texts done, texts total)
RetryHook = Callable[[int, float, "TranslateError"], None]  # (attempt, delay, error)
Sleep = Callable[[float], Awaitable[None]]  # how a retry waits; tests record the delays instead
# A glossary the service applies itself: {term: translation}, or [{"source": term, "target": translation}].
Terms = Mapping[str, str] | Sequence[Mapping[str, str]]


class TranslateError(Exception):
    """A request the service refused or that could not be completed after the retries allowed."""

    def __init__(self, status: int | None, code: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status or 'no response'} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True)
class Translation:
    text: str
    result: str
    cached: bool = False
    latency_ms: float | None = None
    request_id: str | None = None


@dataclass(frozen=True)
class Language:
    code: str
    name: str
    native_name: str = ""


@dataclass(frozen=True)
class Instructions:
    """What the service is told besides the text; each field is sent only when given."""

    glossary: Terms | None = None
    context: str | None = None  # the text that comes before, for the family's contextual prompt
    style: str | None = None  # the style the translation should take (families with a style prompt)

    def fields(self) -> dict[str, Any]:
        """The /translate body fields: a mapping glossary as an object, a list as a list of objects."""
        fields: dict[str, Any] = {}
        if self.glossary:
            glossary = self.glossary
            fields["glossary"] = (
                dict(glossary) if isinstance(glossary, Mapping) else [dict(t) for t in glossary]
            )
        fields.update(
            {key: value for key, value in (("context", self.context), ("style", self.style)) if value}
        )
        return fields


def _payload(
    texts: str | Sequence[str],
    target: str,
    source: str | None,
    options: Mapping[str, Any] | None,
    instructions: Instructions,
) -> dict[str, Any]:
    body: dict[str, Any] = {"text": texts} if isinstance(texts, str) else {"texts": list(texts)}
    body["target_lang"] = target
    if source:
        body["source_lang"] = source
    body.update(instructions.fields())
    body.update({k: v for k, v in (options or {}).items() if v is not None})
    return body


def error_from_response(response: httpx.Response) -> TranslateError:
    """The service's {"error": {"code", "message"}} as an exception (or the raw body when not JSON)."""
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    code, message = "http_error", response.text.strip()[:500] or response.reason_phrase
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        code = str(data["error"].get("code", code))
        message = str(data["error"].get("message", message))
    elif isinstance(data, dict) and "detail" in data:
        message = str(data["detail"])
    return TranslateError(response.status_code, code, message, retry_after)


def _parse_batch(response: httpx.Response, texts: Sequence[str]) -> list[Translation]:
    data = response.json()
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list) or len(results) != len(texts):
        raise TranslateError(response.status_code, "bad_response", f"expected {len(texts)} results")
    cached = data.get("cached")
    flags = cached if isinstance(cached, list) and len(cached) == len(texts) else [False] * len(texts)
    return [
        Translation(text, str(result), bool(flag), data.get("latency_ms"), data.get("request_id"))
        for text, result, flag in zip(texts, results, flags, strict=True)
    ]


def _parse_one(response: httpx.Response, text: str) -> Translation:
    data = response.json()
    if not isinstance(data, dict) or not isinstance(data.get("result"), str):
        raise TranslateError(response.status_code, "bad_response", "no 'result' in the response")
    return Translation(
        text, data["result"], bool(data.get("cached")), data.get("latency_ms"), data.get("request_id")
    )


def _parse_languages(response: httpx.Response) -> list[Language]:
    data = response.json()
    return [
        Language(str(item["code"]), str(item.get("name", item["code"])), str(item.get("native_name", "")))
        for item in data.get("languages", [])
    ]


def _chunks(texts: Sequence[str], size: int) -> list[list[str]]:
    return [list(texts[i : i + size]) for i in range(0, len(texts), size)]


def _http_options(settings: ClientSettings) -> dict[str, Any]:
    headers = {"User-Agent": settings.user_agent, "X-Priority": settings.priority}
    if settings.api_key is not None:
        headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
    return {
        "base_url": settings.base_url,
        "timeout": httpx.Timeout(
            connect=settings.connect_timeout_s,
            read=settings.read_timeout_s,
            write=settings.write_timeout_s,
            pool=settings.pool_timeout_s,
        ),
        "limits": httpx.Limits(
            max_connections=settings.max_connections,
            max_keepalive_connections=settings.max_keepalive_connections,
            keepalive_expiry=settings.keepalive_expiry_s,
        ),
        "headers": headers,
    }


class _RetryPolicy:
    """Decides after each try whether to retry and how long to wait first."""

    def __init__(self, settings: ClientSettings, on_retry: RetryHook | None, rand: Callable[[], float]):
        self.settings = settings
        self.on_retry = on_retry
        self.rand = rand

    def failure(self, response: httpx.Response | None, err: httpx.TransportError | None) -> TranslateError:
        if response is None:
            return TranslateError(None, "connection_error", f"{type(err).__name__}: {err}")
        return error_from_response(response)

    def delay(self, attempt: int, failure: TranslateError) -> float | None:
        """Seconds to wait before retrying, or None when the failure is final."""
        retryable = failure.status is None or (
            failure.status in self.settings.retry_statuses and failure.code not in FINAL_CODES
        )
        if not retryable or attempt >= self.settings.max_retries:
            return None
        seconds = retry_delay(self.settings, attempt, failure.retry_after, self.rand)
        if self.on_retry is not None:
            self.on_retry(attempt + 1, seconds, failure)
        return seconds


class AsyncTranslateClient:
    """asyncio client; one instance per event loop. The one implementation: TranslateClient drives it."""

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        on_retry: RetryHook | None = None,
        rand: Callable[[], float] = random.random,
        sleep: Sleep = asyncio.sleep,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings or ClientSettings()
        self._policy = _RetryPolicy(self.settings, on_retry, rand)
        self._sleep = sleep
        # One request holds a slot per try, not while it backs off: a waiting retry blocks no one.
        self._slots = Width(requests_in_flight(self.settings, None))
        # map_batches' workers take a batch only inside this one, so a batch is taken when it can be sent.
        self._workers = Width(self._slots.limit)
        options = _http_options(self.settings)
        # headers: sent with every request (a replica's document job sends its owner's API key so).
        options["headers"] = {**options["headers"], **(headers or {})}
        self._http = httpx.AsyncClient(**options)

    async def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        attempt = 0
        while True:
            response, error = None, None
            try:
                async with self._slots:
                    response = await self._http.request(method, path, json=body)
                self._resize(response)
                if response.status_code < 400:
                    return response
            except httpx.TransportError as err:
                error = err
            failure = self._policy.failure(response, error)
            wait_s = self._policy.delay(attempt, failure)
            if wait_s is None:
                raise failure
            await self._sleep(wait_s)
            attempt += 1

    def _resize(self, response: httpx.Response) -> None:
        """Requests in flight from what the service says it batches now (replicas come and go)."""
        bulk_texts = parse_bulk_texts(response.headers.get(BULK_TEXTS_HEADER))
        if bulk_texts is not None:
            width = requests_in_flight(self.settings, bulk_texts)
            self._slots.resize(width)
            self._workers.resize(width)

    async def translate(
        self,
        text: str,
        target: str,
        source: str | None = "en",
        options: Mapping[str, Any] | None = None,
        *,
        glossary: Terms | None = None,
        context: str | None = None,
        style: str | None = None,
    ) -> Translation:
        body = _payload(text, target, source, options, Instructions(glossary, context, style))
        return _parse_one(await self._request("POST", "/translate", body), text)

    async def translate_texts(
        self,
        texts: Sequence[str],
        target: str,
        source: str | None = "en",
        options: Mapping[str, Any] | None = None,
        *,
        glossary: Terms | None = None,
        context: str | None = None,
        style: str | None = None,
    ) -> list[Translation]:
        """One batch request; the service bounds how many texts it takes at once."""
        if not texts:
            return []
        body = _payload(texts, target, source, options, Instructions(glossary, context, style))
        return _parse_batch(await self._request("POST", "/translate", body), texts)

    async def map_batches(
        self,
        texts: Sequence[str],
        work: Callable[[list[str]], Awaitable[T]],
        progress: Progress | None = None,
    ) -> list[T]:
        """work(batch) for each batch of settings.batch_size texts, as many at once as requests may be in
        flight (requests_in_flight), results in order.

        Workers take the next batch only when they are free, so a work function that decides to stop
        sending (the service is gone) is asked about each remaining batch before anything is sent.
        The first exception cancels the batches in flight and is raised.
        """
        batches = _chunks(texts, self.settings.batch_size)
        results: dict[int, T] = {}
        queue = iter(enumerate(batches))  # shared by the workers: next() never yields the loop
        done = 0

        async def worker() -> None:
            nonlocal done
            while True:
                async with self._workers:
                    item = next(queue, None)
                    if item is None:
                        return
                    index, batch = item
                    results[index] = await work(batch)
                done += len(batch)
                if progress is not None:
                    progress(done, len(texts))

        # As many workers as may ever be let in (the width can grow once the service says what it takes).
        most = min(most_in_flight(self.settings), len(batches))
        workers = [asyncio.ensure_future(worker()) for _ in range(most)]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        return [results[index] for index in range(len(batches))]

    async def translate_batch(
        self,
        texts: Sequence[str],
        target: str,
        source: str | None = "en",
        options: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
        *,
        glossary: Terms | None = None,
        context: str | None = None,
        style: str | None = None,
    ) -> list[Translation]:
        """Any number of texts, in batches of settings.batch_size sent concurrently; results in order."""

        async def one(batch: list[str]) -> list[Translation]:
            return await self.translate_texts(
                batch, target, source, options, glossary=glossary, context=context, style=style
            )

        return [t for batch in await self.map_batches(texts, one, progress) for t in batch]

    async def languages(self) -> list[Language]:
        return _parse_languages(await self._request("GET", "/languages"))

    async def health(self) -> tuple[int, dict[str, Any]]:
        """Status code and body of GET /health, without retries (a 503 is an answer here)."""
        response = await self._http.get("/health")
        return response.status_code, response.json()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncTranslateClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class TranslateClient:
    """Blocking client; safe to share between threads.

    It drives an AsyncTranslateClient on a private event loop in a daemon thread, so both clients
    retry, bound and batch alike. Callbacks (on_retry, progress) and an injected sleep run on that thread.
    """

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        on_retry: RetryHook | None = None,
        rand: Callable[[], float] = random.random,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        # Made before the loop thread starts, so a client that cannot be made leaves no thread behind.
        self._async = AsyncTranslateClient(settings, on_retry=on_retry, rand=rand, sleep=sleep)
        self.settings = self._async.settings
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="hunyuan-serve-client", daemon=True
        )
        self._thread.start()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # interrupted (Ctrl-C): stop the request too, not only the wait
            raise

    def translate(
        self,
        text: str,
        target: str,
        source: str | None = "en",
        options: Mapping[str, Any] | None = None,
        *,
        glossary: Terms | None = None,
        context: str | None = None,
        style: str | None = None,
    ) -> Translation:
        coro = self._async.translate(
            text, target, source, options, glossary=glossary, context=context, style=style
        )
        return self._call(coro)

    def translate_texts(
        self,
        texts: Sequence[str],
        target: str,
        source: str | None = "en",
        options: Mapping[str, Any] | None = None,
        *,
        glossary: Terms | None = None,
        context: str | None = None,
        style: str | None = None,
    ) -> list[Translation]:
        """One batch request; the service bounds how many texts it takes at once."""
        coro = self._async.translate_texts(
            texts, target, source, options, glossary=glossary, context=context, style=style
        )
        return self._call(coro)

    def translate_batch(
        self,
        texts: Sequence[str],
        target: str,
        source: str | None = "en",
        options: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
        *,
        glossary: Terms | None = None,
        context: str | None = None,
        style: str | None = None,
    ) -> list[Translation]:
        """Any number of texts, in batches of settings.batch_size sent concurrently; results in order."""
        coro = self._async.translate_batch(
            texts, target, source, options, progress, glossary=glossary, context=context, style=style
        )
        return self._call(coro)

    def languages(self) -> list[Language]:
        return self._call(self._async.languages())

    def health(self) -> tuple[int, dict[str, Any]]:
        """Status code and body of GET /health, without retries (a 503 is an answer here)."""
        return self._call(self._async.health())

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._call(self._async.aclose())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> TranslateClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

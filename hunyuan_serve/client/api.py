"""The service's HTTP clients: one async implementation (pooled, retrying, batching) and a sync facade."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from hunyuan_serve.client.retry import RetryHook, RetryPolicy
from hunyuan_serve.client.settings import ClientSettings
from hunyuan_serve.client.width import (
    BULK_TEXTS_HEADER,
    Width,
    most_in_flight,
    parse_bulk_texts,
    requests_in_flight,
)
from hunyuan_serve.client.wire import (
    Instructions,
    ServedLanguage,
    Terms,
    Translation,
    http_options,
    parse_batch,
    parse_languages,
    parse_one,
    payload,
    refuses_qa,
)

T = TypeVar("T")
Progress = Callable[[int, int], None]  # (texts done, texts total)
Sleep = Callable[[float], Awaitable[None]]  # how a retry waits; tests record the delays instead


def _chunks(texts: Sequence[str], size: int) -> list[list[str]]:
    return [list(texts[i : i + size]) for i in range(0, len(texts), size)]


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
        self._policy = RetryPolicy(self.settings, on_retry, rand)
        self._sleep = sleep
        # One request holds a slot per try, not while it backs off: a waiting retry blocks no one.
        self._slots = Width(requests_in_flight(self.settings, None))
        # map_batches' workers take a batch only inside this one, so a batch is taken when it can be sent.
        self._workers = Width(self._slots.limit)
        options = http_options(self.settings)
        # headers: sent with every request (a replica's document job sends its owner's API key so).
        options["headers"] = {**options["headers"], **(headers or {})}
        self._http = httpx.AsyncClient(**options)
        # Set once the service refused the `qa` field (it predates QA): later requests go without it.
        self.qa_refused = False

    async def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        attempt = 0
        while True:
            if self.qa_refused and body is not None and "qa" in body:
                body = {key: value for key, value in body.items() if key != "qa"}
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
            if body is not None and "qa" in body and refuses_qa(failure):
                self.qa_refused = True  # a service that predates QA: asked again without, unchecked
                continue
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
        body = payload(text, target, source, options, Instructions(glossary, context, style))
        return parse_one(await self._request("POST", "/translate", body), text)

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
        body = payload(texts, target, source, options, Instructions(glossary, context, style))
        return parse_batch(await self._request("POST", "/translate", body), texts)

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

    async def languages(self) -> list[ServedLanguage]:
        return parse_languages(await self._request("GET", "/languages"))

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

    def languages(self) -> list[ServedLanguage]:
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

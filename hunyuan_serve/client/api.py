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
from hunyuan_serve.client.width import BULK_TEXTS_HEADER, most_in_flight, parse_bulk_texts, requests_in_flight
from hunyuan_serve.client.wire import (
    Instructions,
    ServedLanguage,
    Terms,
    http_options,
    parse_batch,
    parse_languages,
    parse_lookup,
    parse_one,
    payload,
    refuses_qa,
)
from hunyuan_serve.localization.answers import TranslateError, Translation
from hunyuan_serve.localization.batches import Progress, Width, map_batches

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]  # how a retry waits; tests record the delays instead


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
        most = most_in_flight(self.settings)
        return await map_batches(texts, self.settings.batch_size, self._workers, most, work, progress)

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

    async def memory_lookup(self, texts: Sequence[str], target: str, source: str) -> dict[str, str]:
        """The service's translation memory's target of each text it holds as given, whole (POST
        /memories/lookup, no engine), in batches. Help, not a condition: {} from a service without
        the lookup or that refuses it (a wrong key is then named by the translation requests' refusal)."""
        held = [bool(texts)]  # until the service says the caller has no memory of the pair

        async def one(batch: list[str]) -> dict[str, str]:
            if not held[0]:
                return {}
            body = {"source_lang": source, "target_lang": target, "texts": batch}
            found, held[0] = parse_lookup(await self._request("POST", "/memories/lookup", body), batch)
            return found

        try:
            found = await self.map_batches(texts, one)
        except TranslateError:
            return {}
        return {text: target for part in found for text, target in part.items()}

    async def languages(self) -> list[ServedLanguage]:
        return parse_languages(await self._request("GET", "/languages"))

    async def health(self) -> tuple[int, dict[str, Any]]:
        """Status code and body of GET /health, without retries (a 503 is an answer here)."""
        response = await self._http.get("/health")
        return response.status_code, response.json()

    async def served_model(self) -> str | None:
        """The model the service says it serves (its /health names it), or None when it does not say."""
        try:
            _, body = await self.health()
        except (httpx.HTTPError, ValueError):
            return None
        model = body.get("model") if isinstance(body, dict) else None
        return model if isinstance(model, str) and model else None

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

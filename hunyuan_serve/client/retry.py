"""The clients' retry rules: after each try, whether to retry and how long to wait first."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from hunyuan_serve.client.settings import FINAL_CODES, ClientSettings, retry_delay
from hunyuan_serve.client.wire import TranslateError, error_from_response

RetryHook = Callable[[int, float, TranslateError], None]  # (attempt, delay, error)


class RetryPolicy:
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

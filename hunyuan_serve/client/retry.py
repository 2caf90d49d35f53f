"""The clients' retry rules: after each try, whether to retry and how long to wait first."""

from __future__ import annotations

import ssl
from collections.abc import Callable

import httpx

from hunyuan_serve.client.settings import CERTIFICATE_ERROR, FINAL_CODES, ClientSettings, retry_delay
from hunyuan_serve.client.wire import error_from_response
from hunyuan_serve.localization.answers import TranslateError

RetryHook = Callable[[int, float, TranslateError], None]  # (attempt, delay, error)


class RetryPolicy:
    """Decides after each try whether to retry and how long to wait first."""

    def __init__(self, settings: ClientSettings, on_retry: RetryHook | None, rand: Callable[[], float]):
        self.settings = settings
        self.on_retry = on_retry
        self.rand = rand

    def failure(self, response: httpx.Response | None, err: httpx.TransportError | None) -> TranslateError:
        if response is not None:
            return error_from_response(response)
        untrusted = _certificate_refusal(err)
        if untrusted is not None:
            where = self.settings.ca_file or "the default CAs (SSL_CERT_FILE, else certifi's)"
            return TranslateError(
                None,
                CERTIFICATE_ERROR,
                f"the service's TLS certificate failed verification against {where} ({untrusted}); "
                "for a front with a private CA, pass --ca-file with the CA that signed its certificate",
            )
        return TranslateError(None, "connection_error", f"{type(err).__name__}: {err}")

    def delay(self, attempt: int, failure: TranslateError) -> float | None:
        """Seconds to wait before retrying, or None when the failure is final."""
        retryable = failure.code not in FINAL_CODES and (
            failure.status is None or failure.status in self.settings.retry_statuses
        )
        if not retryable or attempt >= self.settings.max_retries:
            return None
        seconds = retry_delay(self.settings, attempt, failure.retry_after, self.rand)
        if self.on_retry is not None:
            self.on_retry(attempt + 1, seconds, failure)
        return seconds


def _certificate_refusal(err: BaseException | None) -> str | None:
    """The verification error behind a failed connection (httpx wraps ssl's in its own), or None."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, ssl.SSLCertVerificationError):
            return f"{err.reason or 'CERTIFICATE_VERIFY_FAILED'}: {err.verify_message or err}"
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None

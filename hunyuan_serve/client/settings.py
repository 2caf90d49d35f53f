"""Client settings (timeouts, pool, retries) and the pure retry arithmetic of the client."""

from __future__ import annotations

import email.utils
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from hunyuan_serve.config import NginxConfig, Section

API_KEY_ENV = "HUNYUAN_SERVE_API_KEY"
# The 4xx a retry can cure: the request took too long, or came too soon (a rate limit).
RETRIED_4XX = (408, 429)
# A TLS front whose certificate the client does not trust: every try fails the same way (retried, it
# took six tries and 40 s to say so).
CERTIFICATE_ERROR = "certificate_error"
# Refusals that waiting does not cure, whatever status they come with: a key's quota has no period to
# wait out (the service's 429 quota_exceeded), unlike a rate limit's 429 (rate_limited, Retry-After);
# an address slowed for wrong keys (429 too_many_bad_keys) gets a 403 for the same key once the pause
# is over, so waiting it out (Retry-After, a minute by default) only delays that refusal.
FINAL_CODES = frozenset({"quota_exceeded", "too_many_bad_keys", CERTIFICATE_ERROR})


def api_key_from(environ: Mapping[str, str]) -> str | None:
    """The key in API_KEY_ENV, or None when it is unset or empty."""
    return environ.get(API_KEY_ENV) or None


DEFAULT_URL = f"http://127.0.0.1:{NginxConfig.model_fields['port'].default}"


class ClientSettings(Section):
    """How a client talks to the service; every timeout and threshold has a default here."""

    base_url: str = Field(default=DEFAULT_URL, description="Service URL (the Nginx front of `up`).")
    connect_timeout_s: float = Field(default=5.0, gt=0, description="Deadline to open a connection.")
    read_timeout_s: float = Field(default=300.0, gt=0, description="Deadline between bytes of a response.")
    write_timeout_s: float = Field(default=30.0, gt=0, description="Deadline to send a request.")
    pool_timeout_s: float = Field(default=600.0, gt=0, description="Deadline to get a pooled connection.")
    max_connections: int = Field(
        default=64, ge=1, description="Connections the pool opens at most (and so requests in flight)."
    )
    max_keepalive_connections: int = Field(default=64, ge=0, description="Idle connections the pool keeps.")
    keepalive_expiry_s: float = Field(default=30.0, ge=0, description="How long an idle connection is kept.")
    # A fixed 8 batches of 16 cannot fill GPU engines that batch 256 each; the service's Nginx
    # says what its ready engines batch. (On 2 CPU cores the job row read the same at 128, 192 and 384.)
    concurrency: int | None = Field(
        default=None,
        ge=1,
        description="Requests in flight at once; unset: for bulk work, enough batches to fill what the "
        "service's ready engines batch (its X-Hunyuan-Bulk-Texts header), at most max_connections.",
    )
    start_concurrency: int = Field(
        default=8,
        ge=1,
        description="Requests in flight while concurrency is unset and the service said nothing.",
    )
    batch_size: int = Field(default=16, ge=1, description="Texts per batch request.")
    max_retries: int = Field(default=6, ge=0, description="Retries of one request after the first try.")
    backoff_base_s: float = Field(default=0.5, ge=0, description="First retry delay; doubles each retry.")
    backoff_max_s: float = Field(default=30.0, ge=0, description="Largest retry delay without Retry-After.")
    backoff_jitter: float = Field(default=0.5, ge=0, le=1, description="Random fraction added to a delay.")
    retry_after_max_s: float = Field(default=120.0, ge=0, description="Largest Retry-After honoured.")
    retry_statuses: tuple[int, ...] = Field(
        default=(429, 502, 503, 504),
        description=f"HTTP statuses retried (of the 4xx only {', '.join(map(str, RETRIED_4XX))}; "
        f"never {', '.join(sorted(FINAL_CODES - {CERTIFICATE_ERROR}))}).",
    )
    user_agent: str = Field(default="hunyuan-serve-client", description="User-Agent header.")
    ca_file: str | None = Field(
        default=None,
        description="CA certificate (PEM) that signed the service's TLS certificate, for a front with a "
        "private CA; unset: the CAs the environment names (SSL_CERT_FILE, SSL_CERT_DIR), else certifi's.",
    )
    # A service with auth.keys_file refuses requests without a key; SecretStr keeps it out of reprs and logs.
    api_key: SecretStr | None = Field(
        default=None,
        description=f"API key sent as 'Authorization: Bearer KEY' (the CLI reads {API_KEY_ENV} when unset).",
    )
    # A file job should not take the slots of people in the page: the server keeps a share
    # for interactive work and schedules it first.
    priority: Literal["bulk", "interactive"] = Field(
        default="bulk", description="X-Priority header sent with every request (bulk or interactive)."
    )

    @field_validator("ca_file")
    @classmethod
    def _readable_ca(cls, path: str | None) -> str | None:
        """A file that is not a PEM certificate is named here, not as a failure of every request."""
        if path is not None:
            try:
                ssl.create_default_context(cafile=path)
            except (OSError, ssl.SSLError) as err:
                raise ValueError(f"{path}: not a readable PEM CA certificate ({err})") from None
        return path

    @field_validator("retry_statuses")
    @classmethod
    def _only_curable(cls, statuses: tuple[int, ...]) -> tuple[int, ...]:
        """A 4xx other than a timeout or a rate limit is the request's own fault: waiting does not cure it."""
        refusals = [status for status in statuses if 400 <= status < 500 and status not in RETRIED_4XX]
        if refusals:
            listed = ", ".join(map(str, refusals))
            curable = ", ".join(map(str, RETRIED_4XX))
            raise ValueError(f"{listed}: a refusal that waiting does not cure (of the 4xx only {curable})")
        return statuses


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date); None if absent/bad."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retry_delay(
    settings: ClientSettings, attempt: int, retry_after: float | None, rand: Callable[[], float]
) -> float:
    """Delay before retry number attempt+1: exponential backoff with jitter, at least Retry-After.

    Jitter spreads the clients that got the same overload answer, so they do not return together.
    """
    backoff = min(settings.backoff_max_s, settings.backoff_base_s * (2**attempt))
    jitter = backoff * settings.backoff_jitter * rand()
    if retry_after is None:
        return backoff + jitter
    return max(min(retry_after, settings.retry_after_max_s), backoff) + jitter

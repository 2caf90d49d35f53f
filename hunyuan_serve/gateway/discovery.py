"""Asks a host's Nginx which replicas it routes to (GET /_hs/replicas, with the peer secret), over HTTP(S)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Protocol

import httpx

from hunyuan_serve.gateway.hosts import HostListing, parse_listing

LISTING_PATH = "/_hs/replicas"


class DiscoveryError(RuntimeError):
    """A host did not give its listing; the message says why (timeout, refused, HTTP 403...). tls: the
    TLS handshake failed (a plain HTTP host, a certificate the CA did not sign): a mistake, not an outage."""

    def __init__(self, message: str, *, tls: bool = False) -> None:
        super().__init__(message)
        self.tls = tls


def tls_failure(err: BaseException) -> str | None:
    """The TLS error under an httpx error (its cause chain), as one line; None when it is not one."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            reason = getattr(seen, "verify_message", None) or seen.reason or str(seen)
            if seen.reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST"):
                reason += " (it answers in plain HTTP: give the host nginx.tls_cert, docs/tls-hosts.md)"
            return f"TLS handshake failed: {reason}"
        seen = seen.__cause__ or seen.__context__
    return None


# What an answer other than the listing most likely means, for the host's reason in `gateway status`.
_STATUS_HINTS = {
    403: "the host refused the peer secret (is its auth.peer_secret_file the inventory's?)",
    404: f"no {LISTING_PATH} there (is the url a hunyuan-serve `up`'s Nginx, nginx.listen:nginx.port?)",
}


def status_reason(status: int, body: str) -> str:
    """A host's refusal as one short line: the status, a hint where one fits, else the body's start."""
    detail = _STATUS_HINTS.get(status) or " ".join(body.split())[:120]
    return f"HTTP {status}" + (f": {detail}" if detail else "")


class Discovery(Protocol):
    async def fetch(self, url: str) -> HostListing:
        """The listing of the host whose Nginx is at url; DiscoveryError when there is none."""
        ...

    async def aclose(self) -> None: ...


class HttpDiscovery:
    """The real one: httpx, a deadline per poll, no connection kept (a host may vanish)."""

    def __init__(
        self,
        timeout_s: float,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        tls: ssl.SSLContext | None = None,  # https hosts: the CA that verifies them, the client certificate
    ) -> None:
        self._client = httpx.AsyncClient(
            timeout=timeout_s,
            verify=tls if tls is not None else True,
            trust_env=False,
            headers=dict(headers or {}),
            transport=transport,
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    async def fetch(self, url: str) -> HostListing:
        try:
            response = await self._client.get(url + LISTING_PATH)
        except httpx.TimeoutException:
            raise DiscoveryError("timeout") from None
        except httpx.HTTPError as err:
            failure = tls_failure(err)
            raise DiscoveryError(failure or type(err).__name__, tls=failure is not None) from None
        if response.status_code != 200:
            raise DiscoveryError(status_reason(response.status_code, response.text))
        try:
            return parse_listing(response.json())
        except ValueError as err:
            raise DiscoveryError(f"bad listing: {err}") from None

    async def aclose(self) -> None:
        await self._client.aclose()

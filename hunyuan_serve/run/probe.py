"""Health probes of replicas over HTTP (httpx), with a deadline from the config."""

from __future__ import annotations

import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    detail: str
    latency_ms: float


class HttpProber:
    """GET /health (or /health?deep=1) on a replica; only a 200 counts as healthy."""

    def __init__(
        self,
        timeout_s: float,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,  # the peer secret's, on a multi-host deployment
        *,
        tls: ssl.SSLContext | bool | None = None,  # replicas on TLS: how to verify them (False: not)
        server_name: str | None = None,  # the name their certificates are checked for (default: addr's)
    ) -> None:
        self._scheme = "http" if tls is None else "https"
        self._extensions = {"sni_hostname": server_name} if server_name else {}
        self._client = httpx.AsyncClient(
            timeout=timeout_s,
            trust_env=False,
            transport=transport,
            verify=True if tls is None else tls,
            headers=dict(headers or {}),
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    async def probe(self, addr: str, *, deep: bool = False) -> ProbeResult:
        url = f"{self._scheme}://{addr}/health" + ("?deep=1" if deep else "")
        start = time.perf_counter()
        try:
            response = await self._client.get(url, extensions=self._extensions)
        except httpx.TimeoutException:
            return ProbeResult(False, "timeout", (time.perf_counter() - start) * 1000)
        except httpx.HTTPError as err:
            return ProbeResult(False, type(err).__name__, (time.perf_counter() - start) * 1000)
        latency = (time.perf_counter() - start) * 1000
        if response.status_code == 200:
            return ProbeResult(True, "200", latency)
        return ProbeResult(False, f"HTTP {response.status_code}: {_reason(response)}", latency)

    async def aclose(self) -> None:
        await self._client.aclose()


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:80]
    if isinstance(body, dict):
        return str(body.get("reason") or body.get("status") or body.get("error") or "")[:80]
    return ""

"""Health probes of replicas over HTTP (httpx), with a deadline from the config."""

from __future__ import annotations

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
    ) -> None:
        self._client = httpx.AsyncClient(
            timeout=timeout_s,
            trust_env=False,
            transport=transport,
            headers=dict(headers or {}),
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    async def probe(self, addr: str, *, deep: bool = False) -> ProbeResult:
        url = f"http://{addr}/health" + ("?deep=1" if deep else "")
        start = time.perf_counter()
        try:
            response = await self._client.get(url)
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

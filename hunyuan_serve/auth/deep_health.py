"""Who may ask `/health?deep=1`, which makes the engine generate: this host, the gateway, a key holder."""

from __future__ import annotations

import json
import logging
import urllib.parse

from starlette.types import ASGIApp, Receive, Scope, Send

from hunyuan_serve.auth.keys import key_matches
from hunyuan_serve.auth.listen import is_loopback
from hunyuan_serve.auth.replies import ACCESS_LOG, send_refusal
from hunyuan_serve.auth.sources import client_address, header_key, query_key
from hunyuan_serve.edge.dialects import NATIVE

# What `deep=` turns the probe on with (the replica's /health route reads the same).
DEEP_VALUES = ("1", "true", "yes")


def wants_deep(value: str) -> bool:
    return value.lower() in DEEP_VALUES


def deep_refusal(
    scope: Scope, keys: frozenset[str] | None, behind_peer_check: bool, own: frozenset[str] = frozenset()
) -> str | None:
    """Why this request may not run the deep probe, or None when it may: it comes from this host
    (loopback or `own`, the address the replica binds, and not forwarded by Nginx from elsewhere), it
    passed the peer check (the gateway, or a host's own supervisor), or, when the service has keys, it
    carries one of them."""
    address = client_address(scope, behind_peer_check)
    if behind_peer_check or is_loopback(address) or address in own:
        return None
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    key = header_key(headers.get("authorization", "")) or query_key(scope.get("query_string", b""))
    if keys and key is not None and key_matches(key, keys):
        return None
    wanted = "this host (loopback), the peer secret, or an API key" if keys else "this host (loopback)"
    return (
        f"GET /health?deep=1 makes the engine generate, so only {wanted} may ask it; "
        "GET /health (shallow) is open"
    )


class DeepHealthGuard:
    """ASGI middleware: /health?deep=1 from anyone deep_refusal turns away gets a 403 saying what it
    needs; the shallow /health, and every other route, pass untouched."""

    def __init__(
        self, app: ASGIApp, keys: frozenset[str] | None, behind_peer_check: bool, own: frozenset[str]
    ) -> None:
        self.app = app
        self.keys = keys
        self.behind_peer_check = behind_peer_check
        self.own = own
        self.log = logging.getLogger(ACCESS_LOG)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/health" or not self._deep(scope):
            await self.app(scope, receive, send)
            return
        why = deep_refusal(scope, self.keys, self.behind_peer_check, self.own)
        if why is None:
            await self.app(scope, receive, send)
            return
        await send_refusal(send, 403, NATIVE.error("deep_health_refused", why, 403))
        self.log.info(json.dumps({"path": "/health", "status": 403, "error": "deep_health_refused"}))

    @staticmethod
    def _deep(scope: Scope) -> bool:
        args = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return any(wants_deep(value) for value in args.get("deep", []))

"""The replica's ASGI checks: the peer secret first, then the key, refusals in each API's shape."""

from __future__ import annotations

import json
import logging

from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from hunyuan_serve.auth.keys import key_id, key_matches, load_keys
from hunyuan_serve.auth.peer import PEER_HEADER, peer_matches, peer_secret
from hunyuan_serve.auth.sources import body_key, buffered, header_key, query_key
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.edge.dialects import PEER_REFUSED, Dialect, dialect_of

ACCESS_LOG = "hunyuan_serve.access"
# The request-state field where the key check leaves the caller's key_id (the replica reads it there).
KEY_ID_STATE = "hs_key_id"
# The key itself, in the request's scope only (never logged): sent on with a call made for the caller.
KEY_STATE = "hs_key"


class PeerCheck:
    """ASGI middleware: every request, /health and /metrics too, carries the peer secret or gets a 403
    in the path's dialect (a multi-host replica answers its gateway and its own host only)."""

    def __init__(self, app: ASGIApp, secret: str) -> None:
        self.app = app
        self.secret = secret
        self.header = PEER_HEADER.lower().encode("latin-1")
        self.log = logging.getLogger(ACCESS_LOG)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v.decode("latin-1") for k, v in scope["headers"] if k == self.header), None)
        if peer_matches(given, self.secret):
            await self.app(scope, receive, send)
            return
        body = json.dumps(dialect_of(scope["path"]).error("peer_refused", PEER_REFUSED, 403)).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        # Neither the secret nor what was sent in its place is logged.
        self.log.info(json.dumps({"path": scope["path"], "status": 403, "error": "peer_refused"}))


class KeyCheck:
    """ASGI middleware: every route but /health needs one of the keys; refusals in the path's dialect.

    The key comes from the Authorization header, `?token=` (or `?api_key=`), or, for LibreTranslate,
    the body's `api_key`: only the app sees the body, so the check lives here and not in Nginx.
    /metrics read straight from the replica (the supervisor, `status`, Prometheus on loopback) needs
    none; through Nginx, which always adds X-Forwarded-For, it does.
    """

    def __init__(self, app: ASGIApp, keys: frozenset[str], max_body_bytes: int) -> None:
        self.app = app
        self.keys = keys
        self.max_body_bytes = max_body_bytes
        self.log = logging.getLogger(ACCESS_LOG)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._guarded(scope):
            await self.app(scope, receive, send)
            return
        dialect = dialect_of(scope["path"])
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        key = header_key(headers.get("authorization", "")) or query_key(scope.get("query_string", b""))
        # Any method: libretranslatepy sends its api_key as a form body even on GET /languages.
        if key is None and dialect.body_key:
            body, receive = await buffered(receive, self.max_body_bytes)
            key = body_key(body, headers.get("content-type", ""))
        if key is not None and key_matches(key, self.keys):
            # Who calls, for the routes that keep things per key (glossaries, usage): never the key itself.
            state = scope.setdefault("state", {})
            state[KEY_ID_STATE], state[KEY_STATE] = key_id(key), key
            await self.app(scope, receive, send)
            return
        await self._refuse(dialect, key is None, headers.get("x-request-id", ""), send)

    def _guarded(self, scope: Scope) -> bool:
        path = scope["path"]
        if path == "/health" or scope["method"] == "OPTIONS":
            return False
        proxied = any(k == b"x-forwarded-for" for k, _ in scope["headers"])
        return proxied or path != "/metrics"

    async def _refuse(self, dialect: Dialect, missing: bool, request_id: str, send: Send) -> None:
        code = "missing_api_key" if missing else "invalid_api_key"
        status = dialect.missing_status if missing else dialect.wrong_status
        message = dialect.missing_message if missing else dialect.wrong_message
        if dialect.name == "openai":
            code = "invalid_api_key"  # what OpenAI's clients and docs name both cases
        body = json.dumps(dialect.error(code, message, status)).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if missing:
            headers.append((b"www-authenticate", b"Bearer"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        # The refusal's log line names no key, only that one was missing or wrong.
        self.log.info(json.dumps({"request_id": request_id, "status": status, "error": code}))


def install(app: Starlette, cfg: ServeConfig) -> None:
    """Put the key check in front of the app when a keys file is configured, and the peer check in
    front of that when a peer secret is (both read once, at start)."""
    if cfg.auth.keys_file:
        # A document upload may carry its api_key after the file: the check reads that far.
        limit = max(cfg.replica.max_body_bytes, cfg.replica.document_max_bytes + 64 * 1024)
        app.add_middleware(KeyCheck, keys=load_keys(cfg.auth.keys_file), max_body_bytes=limit)
    secret = peer_secret(cfg.auth)
    if secret is not None:  # added last, so it runs first: a caller without it learns nothing else
        app.add_middleware(PeerCheck, secret=secret)

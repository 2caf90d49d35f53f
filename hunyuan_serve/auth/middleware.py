"""The replica's ASGI checks: the peer secret first, then the key, refusals in each API's shape."""

from __future__ import annotations

import json
import logging

from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from hunyuan_serve.auth.deep_health import DeepHealthGuard
from hunyuan_serve.auth.keys import key_id, key_matches, load_keys
from hunyuan_serve.auth.peer import PEER_HEADER, peer_matches, peer_secret
from hunyuan_serve.auth.replies import ACCESS_LOG, send_refusal
from hunyuan_serve.auth.sources import body_key, buffered, client_address, header_key, query_key
from hunyuan_serve.auth.throttle import SLOWED_MESSAGE, BadKeys
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.edge.dialects import PEER_REFUSED, Dialect, dialect_of, is_open

__all__ = ["ACCESS_LOG", "KEY_ID_STATE", "KEY_STATE", "KeyCheck", "PeerCheck", "install"]

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
        dialect = dialect_of(scope["path"])
        body = dialect.error("peer_refused", PEER_REFUSED, 403)
        await send_refusal(send, 403, body, _headers(dialect))
        # Neither the secret nor what was sent in its place is logged.
        self.log.info(json.dumps({"path": scope["path"], "status": 403, "error": "peer_refused"}))


class KeyCheck:
    """ASGI middleware: every route but /health needs one of the keys; refusals in the path's dialect.

    The key comes from the Authorization header, `?token=` (or `?api_key=`), or, for LibreTranslate,
    the body's `api_key`: only the app sees the body, so the check lives here and not in Nginx.
    /metrics read straight from the replica (the supervisor, `status`, Prometheus on loopback) needs
    none; through Nginx, which always adds X-Forwarded-For, it does. Wrong keys are counted per client
    address (BadKeys): past the limit, that address's wrong keys get a 429 with Retry-After.
    """

    def __init__(
        self,
        app: ASGIApp,
        keys: frozenset[str],
        max_body_bytes: int,
        bad_keys: BadKeys | None = None,
        behind_peer_check: bool = False,
    ) -> None:
        self.app = app
        self.keys = keys
        self.max_body_bytes = max_body_bytes
        self.bad_keys = bad_keys or BadKeys(0, 1.0, 1)
        self.behind_peer_check = behind_peer_check
        self.log = logging.getLogger(ACCESS_LOG)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._guarded(scope):
            await self.app(scope, receive, send)
            return
        dialect = dialect_of(scope["path"])
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        key = header_key(headers.get("authorization", "")) or query_key(scope.get("query_string", b""))
        # Any method: libretranslatepy sends its api_key as a form body even on GET /languages.
        if key is None and dialect.keys.body:
            body, receive = await buffered(receive, self.max_body_bytes)
            key = body_key(body, headers.get("content-type", ""))
        if key is not None and key_matches(key, self.keys):
            # Who calls, for the routes that keep things per key (glossaries, usage): never the key itself.
            state = scope.setdefault("state", {})
            state[KEY_ID_STATE], state[KEY_STATE] = key_id(key), key
            await self.app(scope, receive, send)
            return
        request_id = headers.get("x-request-id", "")
        if key is not None and await self._slowed(scope, dialect, request_id, send):
            return
        await self._refuse(dialect, key is None, request_id, send)

    def _guarded(self, scope: Scope) -> bool:
        path = scope["path"]
        if is_open(path) or scope["method"] == "OPTIONS":  # each API's declared open routes
            return False
        proxied = any(k == b"x-forwarded-for" for k, _ in scope["headers"])
        return proxied or path != "/metrics"

    async def _slowed(self, scope: Scope, dialect: Dialect, request_id: str, send: Send) -> bool:
        """A wrong key counted against its address; True when a 429 went out for it instead."""
        address = client_address(scope, self.behind_peer_check)
        retry = self.bad_keys.slowed_for(address) or self.bad_keys.wrong(address)
        if retry is None:
            return False
        body = dialect.error("too_many_bad_keys", SLOWED_MESSAGE.format(seconds=retry), 429)
        await send_refusal(send, 429, body, [(b"retry-after", str(retry).encode()), *_headers(dialect)])
        self.log.info(json.dumps({"request_id": request_id, "status": 429, "error": "too_many_bad_keys"}))
        return True

    async def _refuse(self, dialect: Dialect, missing: bool, request_id: str, send: Send) -> None:
        keys = dialect.keys
        code = keys.missing_code if missing else "invalid_api_key"
        status = keys.missing_status if missing else keys.wrong_status
        message = keys.missing_message if missing else keys.wrong_message
        # The challenge names the scheme the API's clients send (its first declared).
        challenge = [(b"www-authenticate", keys.schemes[0].encode("latin-1"))] if missing else []
        await send_refusal(
            send, status, dialect.error(code, message, status), [*challenge, *_headers(dialect)]
        )
        # The refusal's log line names no key, only that one was missing or wrong.
        self.log.info(json.dumps({"request_id": request_id, "status": status, "error": code}))


def _headers(dialect: Dialect) -> list[tuple[bytes, bytes]]:
    """The headers the API declares on every error it answers (LibreTranslate's CORS)."""
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in dialect.headers.items()]


def install(app: Starlette, cfg: ServeConfig) -> None:
    """Put the deep-health guard in front of the app, the key check in front of that when a keys file
    is configured, and the peer check in front of both when a peer secret is (all read once, at start)."""
    secret = peer_secret(cfg.auth)
    keys = load_keys(cfg.auth.keys_file) if cfg.auth.keys_file else None
    behind = secret is not None  # then PeerCheck runs first: whoever gets further holds the secret
    # The supervisor probes a replica on the address it binds, from this same host.
    own = frozenset({cfg.replica.host})
    app.add_middleware(DeepHealthGuard, keys=keys, behind_peer_check=behind, own=own)
    if keys is not None:
        # A document upload may carry its api_key after the file: the check reads that far.
        limit = max(cfg.replica.max_body_bytes, cfg.replica.document_max_bytes + 64 * 1024)
        bad_keys = BadKeys.of(cfg.auth)
        app.add_middleware(
            KeyCheck, keys=keys, max_body_bytes=limit, bad_keys=bad_keys, behind_peer_check=behind
        )
    if secret is not None:  # added last, so it runs first: a caller without it learns nothing else
        app.add_middleware(PeerCheck, secret=secret)

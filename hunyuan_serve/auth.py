"""API keys and the peer secret: key file, where a key comes from, the listen check, the replica's check."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hunyuan_serve.config import AuthConfig, ConfigError, ServeConfig
from hunyuan_serve.edge.dialects import PEER_REFUSED, Dialect, dialect_of

ACCESS_LOG = "hunyuan_serve.access"
# Multi-host: the header carrying the shared secret (auth.peer_secret_file) from the gateway to a host.
PEER_HEADER = "X-Hunyuan-Peer"
# The request-state field where the key check leaves the caller's key_id (the replica reads it there).
KEY_ID_STATE = "hs_key_id"
# The key itself, in the request's scope only (never logged): sent on with a call made for the caller.
KEY_STATE = "hs_key"


# -- keys -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeySpec:
    """One key of the keys file and its options: `limit`, the characters it may translate (None: no limit);
    `priority`, the class of its requests that name none (None: the endpoint's default); `weight`, its
    share of the bulk slots against other keys with bulk work in flight."""

    key: str
    limit: int | None = None
    priority: str | None = None
    weight: int = 1


# A line: the key, then options as name=value, each separated by spaces:
# `sk-abc123 limit=500000 priority=bulk weight=2`.
_KEY_OPTIONS = ("limit", "priority", "weight")
KEY_PRIORITIES = ("interactive", "bulk")


def load_key_specs(path: str) -> dict[str, KeySpec]:
    """Every key of a keys file with its options; blank lines and `#` comments skipped; none is an error."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        # In a container the file is a mounted secret: say which user must be able to read it.
        who = f" as uid {os.getuid()}" if isinstance(err, PermissionError) else ""
        raise ConfigError(f"auth.keys_file: cannot read {path}{who}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"auth.keys_file: {path} is not UTF-8 text") from None
    specs: dict[str, KeySpec] = {}
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        spec = _key_spec(words, f"auth.keys_file: {path} line {number}")
        if specs.get(spec.key, spec) != spec:
            raise ConfigError(f"auth.keys_file: {path} line {number}: a key listed before with other options")
        specs[spec.key] = spec
    if not specs:
        raise ConfigError(f"auth.keys_file: {path} holds no key")
    return specs


def _key_spec(words: list[str], where: str) -> KeySpec:
    """A line's key and options; the message names the line and the option, never the key."""
    options: dict[str, str] = {}
    for word in words[1:]:
        name, equals, value = word.partition("=")
        if not equals or name not in _KEY_OPTIONS:
            raise ConfigError(
                f"{where}: a key holds a space, or an option after it is not name=value "
                f"({', '.join(_KEY_OPTIONS)})"
            )
        options[name] = value
    limit = None
    if "limit" in options:
        digits = options["limit"].replace("_", "")
        if not digits.isdigit():
            raise ConfigError(f"{where}: limit= takes a whole number of characters, e.g. limit=500000")
        limit = int(digits)
    priority = options.get("priority")
    if priority is not None and priority not in KEY_PRIORITIES:
        raise ConfigError(f"{where}: priority= takes interactive or bulk")
    weight = options.get("weight", "1")
    if not weight.isdigit() or int(weight) < 1:
        raise ConfigError(f"{where}: weight= takes a whole number of at least 1, e.g. weight=2")
    return KeySpec(words[0], limit, priority, int(weight))


def load_keys(path: str) -> frozenset[str]:
    """The keys of a keys file: one a line (options after it), blank lines and `#` comments skipped."""
    return frozenset(load_key_specs(path))


def key_limits(cfg: AuthConfig) -> dict[str, int | None]:
    """Each key's limit by key_id (none without a keys file): what the replica's usage check reads."""
    if not cfg.keys_file:
        return {}
    return {key_id(spec.key): spec.limit for spec in load_key_specs(cfg.keys_file).values()}


def key_priorities(specs: Mapping[str, KeySpec]) -> dict[str, str]:
    """The keys that name a default class (priority=), by key_id, and that class."""
    return {kid: spec.priority for kid, spec in specs.items() if spec.priority}


def key_specs_by_id(cfg: AuthConfig) -> dict[str, KeySpec]:
    """Each key's options by key_id (none without a keys file): what the replica's priority rules read."""
    if not cfg.keys_file:
        return {}
    return {key_id(spec.key): spec for spec in load_key_specs(cfg.keys_file).values()}


def key_id(key: str) -> str:
    """The key's identity where the key itself must not go (owners, logs, metrics): its SHA-256, hex."""
    return hashlib.sha256(key.encode()).hexdigest()


def key_matches(given: str, keys: frozenset[str]) -> bool:
    """Whether the key is one of the keys, in time that does not depend on where they differ."""
    # Digests of equal length: compare_digest returns at once on a length mismatch, which would tell it.
    digest = hashlib.sha256(given.encode()).digest()
    found = False
    for key in keys:  # every key compared, so the time does not tell which one came close
        found |= hmac.compare_digest(digest, hashlib.sha256(key.encode()).digest())
    return found


def header_key(authorization: str) -> str | None:
    """The key of an `Authorization: Bearer K` or `Authorization: DeepL-Auth-Key K` header."""
    scheme, _, key = authorization.strip().partition(" ")
    if scheme.lower() in ("bearer", "deepl-auth-key") and key.strip():
        return key.strip()
    return None


def body_key(body: bytes, content_type: str) -> str | None:
    """LibreTranslate's `api_key` field of a JSON, form or multipart body (None when absent or unreadable);
    multipart is how its /translate_file sends the key beside the file (LibreTranslate app.py)."""
    if content_type.startswith("multipart/form-data"):
        return _multipart_key(body, content_type)
    if content_type.startswith("application/json"):
        try:
            data = json.loads(body)
        except ValueError:
            return None
        value = data.get("api_key") if isinstance(data, dict) else None
        return value if isinstance(value, str) and value else None
    try:
        form = urllib.parse.parse_qs(body.decode("utf-8"), strict_parsing=False)
    except UnicodeDecodeError:
        return None
    values = form.get("api_key") or [""]
    return values[0] or None


def _multipart_key(body: bytes, content_type: str) -> str | None:
    import email.parser
    import email.policy

    head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", errors="replace")
    try:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    except (ValueError, TypeError):
        return None
    for part in message.iter_parts() if message.is_multipart() else ():
        if part.get_param("name", header="content-disposition") == "api_key" and not part.get_filename():
            value = part.get_payload(decode=True)
            text = value.decode("utf-8", errors="replace").strip() if isinstance(value, bytes) else ""
            return text or None
    return None


def open_listen_problem(cfg: ServeConfig, *, peer_guards_listen: bool = True) -> str | None:
    """Why `up` (or the gateway) must not start as configured: an unusable keys or secret file, or a
    non-loopback address that nothing guards. peer_guards_listen: the peer secret guards nginx.listen
    (a host's Nginx refuses callers without it; a gateway's public front does not)."""
    try:
        if cfg.auth.keys_file:
            load_keys(cfg.auth.keys_file)
        peer = peer_secret(cfg.auth) is not None
    except ConfigError as err:
        return str(err)
    if not (is_loopback(cfg.replica.host) or peer or cfg.auth.allow_open):
        return (
            f"replica.host {cfg.replica.host} is not loopback and no auth.peer_secret_file is set, so anyone "
            "on that network could call the replicas; set auth.peer_secret_file (the gateway's), or "
            "auth.allow_open: true"
        )
    if (
        is_loopback(cfg.nginx.listen)
        or cfg.auth.keys_file
        or cfg.auth.allow_open
        or (peer and peer_guards_listen)
    ):
        return None
    return (
        f"nginx.listen {cfg.nginx.listen} is not loopback and no auth.keys_file is set, so anyone could "
        "call the API; set auth.keys_file, auth.peer_secret_file on a host behind a gateway, or "
        "auth.allow_open: true to serve it open"
    )


# -- the peer secret of a multi-host deployment ---------------------------------------------------

# It travels in a header and sits in Nginx's config as a quoted string: nothing that would need escaping.
_PEER_SECRET = re.compile(r"^[A-Za-z0-9._~+/=-]{16,}$")


def load_peer_secret(path: str) -> str:
    """The secret of a peer_secret_file: its text without the whitespace (newline) around it."""
    try:
        secret = Path(path).read_text(encoding="utf-8").strip()
    except OSError as err:
        raise ConfigError(f"auth.peer_secret_file: cannot read {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"auth.peer_secret_file: {path} is not UTF-8 text") from None
    if not secret:
        raise ConfigError(f"auth.peer_secret_file: {path} is empty")
    if not _PEER_SECRET.match(secret):
        raise ConfigError(
            f"auth.peer_secret_file: {path}: the secret must be 16 or more letters, digits or ._~+/=- "
            "(e.g. `openssl rand -hex 32`)"
        )
    return secret


def peer_secret(cfg: AuthConfig) -> str | None:
    """The deployment's shared secret, read from its file now; None on a single host."""
    return load_peer_secret(cfg.peer_secret_file) if cfg.peer_secret_file else None


def peer_headers(cfg: AuthConfig) -> dict[str, str]:
    """The header every request to a host's replicas (and the host's Nginx) carries; none unset."""
    secret = peer_secret(cfg)
    return {PEER_HEADER: secret} if secret else {}


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("latin-1", errors="replace")).digest()


def peer_matches(given: str | None, secret: str) -> bool:
    """Whether the header holds the secret, in time that does not depend on where they differ."""
    return given is not None and hmac.compare_digest(_digest(given), _digest(secret))


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


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


# -- the replica's check --------------------------------------------------------------------------


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
        key = header_key(headers.get("authorization", "")) or _query_key(scope.get("query_string", b""))
        # Any method: libretranslatepy sends its api_key as a form body even on GET /languages.
        if key is None and dialect.body_key:
            body, receive = await _buffered(receive, self.max_body_bytes)
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


def request_key(headers: Mapping[str, str], query: bytes) -> str | None:
    """The key a request came with (its header, else ?token=), to send on with a call made for it."""
    return header_key(headers.get("authorization", "")) or _query_key(query)


def _query_key(query: bytes) -> str | None:
    args = urllib.parse.parse_qs(query.decode("latin-1"))
    for name in ("token", "api_key"):
        if args.get(name) and args[name][0]:
            return args[name][0]
    return None


async def _buffered(receive: Receive, limit: int) -> tuple[bytes, Receive]:
    """The request body read up to limit (past it the key is not looked for), and a receive replaying it."""
    messages: list[Message] = []
    size, more = 0, True
    while more and size <= limit:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(m.get("body", b"") for m in messages) if not more else b""

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return body, replay


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

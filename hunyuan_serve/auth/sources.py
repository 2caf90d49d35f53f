"""Where a request's key comes from: its Authorization header, `?token=`, or LibreTranslate's body."""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Mapping

from starlette.types import Message, Receive, Scope

from hunyuan_serve.auth.listen import is_loopback
from hunyuan_serve.edge.dialects import BASIC_KEY, KEY_SCHEMES


def header_key(authorization: str) -> str | None:
    """The key of an Authorization header in any API's declared scheme (`Bearer K`, `DeepL-Auth-Key K`),
    or the password of a Basic one: a client that takes only a URL (Weblate's tmserver machinery) sends
    its `https://name:KEY@host/...` so."""
    scheme, _, key = authorization.strip().partition(" ")
    if scheme.lower() in KEY_SCHEMES and key.strip():
        return key.strip()
    if BASIC_KEY and scheme.lower() == "basic" and key.strip():
        try:
            password = base64.b64decode(key.strip(), validate=True).decode("utf-8").partition(":")[2]
        except (ValueError, UnicodeDecodeError):
            return None
        return password or None
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


def request_key(headers: Mapping[str, str], query: bytes) -> str | None:
    """The key a request came with (its header, else ?token=), to send on with a call made for it."""
    return header_key(headers.get("authorization", "")) or query_key(query)


def query_key(query: bytes) -> str | None:
    args = urllib.parse.parse_qs(query.decode("latin-1"))
    for name in ("token", "api_key"):
        if args.get(name) and args[name][0]:
            return args[name][0]
    return None


async def buffered(receive: Receive, limit: int) -> tuple[bytes, Receive]:
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


def client_address(scope: Scope, behind_peer_check: bool) -> str:
    """The address of whoever sent the request: the peer's own, unless the peer is a front that says
    whom it forwards: the last X-Forwarded-For entry, the one Nginx's $proxy_add_x_forwarded_for added
    (the entries before it, and X-Real-IP, which our Nginx does not set, pass through from the caller).
    Only a loopback peer (this host's Nginx) or one that passed the peer check (the gateway's Nginx) is
    believed: from anyone else the header is whatever the caller chose to write."""
    client = scope.get("client")
    peer = str(client[0]) if client else ""
    if not (behind_peer_check or is_loopback(peer)):
        return peer
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    forwarded = headers.get("x-forwarded-for", "").rsplit(",", 1)[-1].strip()
    return forwarded or peer

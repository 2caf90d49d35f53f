"""How the auth checks answer a refusal: a JSON body in the path's API shape, with its headers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from starlette.types import Send

# The logger of every request's line, the refusals' included (they name no key, only why).
ACCESS_LOG = "hunyuan_serve.access"


async def send_refusal(
    send: Send, status: int, body: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """The whole response: status, the JSON body, its type and length, and any further headers."""
    data = json.dumps(body).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*head, *headers]})
    await send({"type": "http.response.body", "body": data})

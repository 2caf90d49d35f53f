"""The client marks its requests bulk by default, so a file job leaves people's slots alone."""

from __future__ import annotations

import httpx
import pydantic
import pytest

from hunyuan_serve.client.settings import ClientSettings
from hunyuan_serve.client.wire import http_options


def _sent_header(settings: ClientSettings) -> str:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["x-priority"])
        return httpx.Response(200, json={})

    with httpx.Client(transport=httpx.MockTransport(answer), **http_options(settings)) as client:
        client.post("/translate", json={"text": "x"})
    return seen[0]


def test_the_client_sends_bulk_unless_told_otherwise() -> None:
    assert _sent_header(ClientSettings()) == "bulk"
    assert _sent_header(ClientSettings(priority="interactive")) == "interactive"


def test_a_bad_client_priority_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="priority"):
        ClientSettings.model_validate({"priority": "urgent"})

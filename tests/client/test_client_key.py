"""The client sends an API key as a Bearer header, from --api-key or HUNYUAN_SERVE_API_KEY, unshown."""

from __future__ import annotations

import argparse

import httpx
import pytest

from hunyuan_serve.client.cli import add_parser, settings_from_args
from hunyuan_serve.client.settings import API_KEY_ENV, ClientSettings
from hunyuan_serve.client.wire import http_options

KEY = "sk-client-key-3e2d1c"


def _sent_authorization(settings: ClientSettings) -> str | None:
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={})

    with httpx.Client(transport=httpx.MockTransport(answer), **http_options(settings)) as client:
        client.post("/translate", json={"text": "x"})
    return seen[0]


def _settings(argv: list[str], environ: dict[str, str]) -> ClientSettings:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    return settings_from_args(parser.parse_args(["translate", "--to", "de", *argv, "in.txt"]), environ)


def test_a_key_goes_out_as_a_bearer_header_and_none_without_one() -> None:
    assert _sent_authorization(ClientSettings(api_key=KEY)) == f"Bearer {KEY}"
    assert _sent_authorization(ClientSettings()) is None


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        ([], {}, None),
        ([], {API_KEY_ENV: KEY}, KEY),
        ([], {API_KEY_ENV: ""}, None),
        (["--api-key", "sk-flag"], {API_KEY_ENV: KEY}, "sk-flag"),  # the flag wins over the environment
    ],
)
def test_the_cli_takes_the_key_from_its_flag_or_the_environment(
    argv: list[str], environ: dict[str, str], expected: str | None
) -> None:
    settings = _settings(argv, environ)
    assert (settings.api_key.get_secret_value() if settings.api_key else None) == expected


def test_the_key_is_not_in_the_settings_repr() -> None:
    settings = ClientSettings(api_key=KEY)
    assert KEY not in repr(settings) and KEY not in str(settings.model_dump())

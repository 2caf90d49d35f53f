"""The key guards through the keyed shared stack (Nginx, two replicas): wrong keys from one address
slowed with a 429 and Retry-After in each API's shape, while right keys pass; the deep health refused
to a caller Nginx forwards from elsewhere, answered to this host and to a key holder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from hunyuan_serve.config import AuthConfig
from tests.support.shared_stack import KEYED_REPLICAS, KEYS, SharedStack

pytestmark = [pytest.mark.engine, pytest.mark.nginx]

KEY = KEYS["keys"].secret
WRONG = "sk-wrong-guess-0000000000"
LIMIT = AuthConfig().bad_key_limit  # the keyed stack's, the default
# The slowed address: its own on loopback, so the other modules' wrong keys (from 127.0.0.1) count apart.
SLOWED, OTHER = "127.0.0.2", "127.0.0.1"
TEXT = {"source_lang": "en", "target_lang": "de"}


def _client(stack: SharedStack, source: str) -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=source)
    return httpx.Client(base_url=stack.url, transport=transport, trust_env=False, timeout=120)


def _native(http: httpx.Client, key: str) -> httpx.Response:
    return http.post("/translate", json={**TEXT, "text": "Hello"}, headers={"Authorization": f"Bearer {key}"})


def _openai(http: httpx.Client, key: str) -> httpx.Response:
    body = {"model": "any", "messages": [{"role": "user", "content": "Hello"}]}
    return http.post("/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"})


def _deepl(http: httpx.Client, key: str) -> httpx.Response:
    body = {"text": ["Hello"], "target_lang": "DE"}
    return http.post("/v2/translate", json=body, headers={"Authorization": f"DeepL-Auth-Key {key}"})


def _libre(http: httpx.Client, key: str) -> httpx.Response:
    return http.post(
        "/libretranslate/translate", json={"q": "Hello", "source": "en", "target": "de", "api_key": key}
    )


def _immersive(http: httpx.Client, key: str) -> httpx.Response:
    body = {"text_list": ["Hello"], "source_lang": "en", "target_lang": "de"}
    return http.post("/immersive/translate", params={"token": key}, json=body)


def _message(dialect: str, body: dict[str, Any]) -> str:
    if dialect == "openai":
        assert body["error"]["type"] == "rate_limit_error" and body["error"]["code"] == "too_many_bad_keys"
        return str(body["error"]["message"])
    if dialect in ("native", "immersive"):
        assert body["error"]["code"] == "too_many_bad_keys"
        return str(body["error"]["message"])
    return str(body["message"] if dialect == "deepl" else body["error"])


CALLS: dict[str, Callable[[httpx.Client, str], httpx.Response]] = {
    "native": _native,
    "openai": _openai,
    "deepl": _deepl,
    "libretranslate": _libre,
    "immersive": _immersive,
}


def _slowed(http: httpx.Client, call: Callable[[httpx.Client, str], httpx.Response]) -> httpx.Response:
    """Wrong keys until a 429: each replica slows the address past its own LIMIT, so within
    KEYED_REPLICAS * (LIMIT + 1) tries every replica Nginx may pick has."""
    for _ in range(KEYED_REPLICAS * (LIMIT + 1)):
        answer = call(http, WRONG)
        if answer.status_code == 429:
            return answer
        assert answer.status_code in (401, 403), answer.text
    pytest.fail(f"no 429 after {KEYED_REPLICAS * (LIMIT + 1)} wrong keys")


def test_wrong_keys_from_one_address_are_slowed_in_each_apis_shape(keyed_stack: SharedStack) -> None:
    with _client(keyed_stack, SLOWED) as slowed, _client(keyed_stack, OTHER) as other:
        # No replica can be past the limit before LIMIT wrong keys in all: these are plain refusals.
        assert {_native(slowed, WRONG).status_code for _ in range(LIMIT)} == {403}
        for dialect, call in CALLS.items():
            answer = _slowed(slowed, call)
            retry = int(answer.headers["Retry-After"])
            assert 1 <= retry <= AuthConfig().bad_key_retry_after_s
            assert "too many wrong API keys from this address" in _message(dialect, answer.json()), dialect
        # A right key from another address is unaffected, and so is one from the slowed address: a team
        # behind one NAT keeps working while one broken script is slowed.
        assert _native(other, KEY).status_code == 200
        assert _native(slowed, KEY).status_code == 200
        assert _native(other, WRONG).status_code == 403  # the other address's wrong key: a plain refusal


def test_the_deep_health_answers_this_host_and_a_key_not_a_forwarded_caller(keyed_stack: SharedStack) -> None:
    replica = f"http://127.0.0.1:{keyed_stack.base_port}"
    with httpx.Client(base_url=replica, trust_env=False, timeout=60) as http:
        # What Nginx would send on for a caller off this host: the replica believes its own front.
        forwarded = http.get("/health", params={"deep": "1"}, headers={"X-Forwarded-For": "203.0.113.9"})
        assert forwarded.status_code == 403, forwarded.text
        why = forwarded.json()["error"]
        assert why["code"] == "deep_health_refused" and "an API key" in why["message"]
        shallow = http.get("/health", headers={"X-Forwarded-For": "203.0.113.9"})
        assert shallow.status_code == 200 and shallow.json()["deep"] is False  # load balancers' stays open
        keyed = http.get(
            "/health",
            params={"deep": "1"},
            headers={"X-Forwarded-For": "203.0.113.9", "Authorization": f"Bearer {KEY}"},
        )
        assert keyed.status_code == 200 and keyed.json()["deep"] is True
        own = http.get("/health", params={"deep": "1"})  # the supervisor's own probe
        assert own.status_code == 200 and own.json()["deep"] is True

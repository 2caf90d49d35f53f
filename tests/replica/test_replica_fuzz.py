"""Property test: no malformed /translate request gets a 5xx; every 4xx is the JSON error shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replica_fakes import FakeEngine, serve_in_thread
from test_replica_app import make_config, wait_ready

from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.schema import _KNOWN_KEYS

# The request keys the server knows, plus one it must refuse.
KEYS = [*sorted(_KNOWN_KEYS), "extra"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["en", "zh", "ZH-tw", "yue", "xx", "", " ", "zh_Hant"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
bodies = st.dictionaries(st.sampled_from(KEYS), values, max_size=7)


def encode(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")


raw_bytes = st.one_of(
    st.binary(max_size=200),
    bodies.map(encode),
    bodies.map(lambda b: encode(b)[: max(1, len(encode(b)) // 2)]),
    st.lists(values, max_size=3).map(encode),
)


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    engine = FakeEngine()
    app = create_app(engine, make_config(max_batch_texts=3), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=10) as http:
        wait_ready(http)
        yield http


def check(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["code"], str) and isinstance(error["message"], str) and error["message"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=raw_bytes)
def test_no_malformed_body_gets_a_5xx(client: httpx.Client, body: bytes) -> None:
    check(client.post("/translate", content=body, headers={"content-type": "application/json"}))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies)
def test_no_malformed_object_gets_a_5xx(client: httpx.Client, body: dict[str, Any]) -> None:
    check(client.post("/translate", content=encode(body)))

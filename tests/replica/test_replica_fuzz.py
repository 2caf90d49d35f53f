"""Property test: no malformed /translate request gets a 5xx; every 4xx is the JSON error shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from hunyuan_serve.replica.app import create_app
from tests.support.bodies import bodies, check, encode, raw_bytes
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    engine = FakeEngine()
    app = create_app(engine, make_config(max_batch_texts=3), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=10) as http:
        wait_ready(http)
        yield http


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=raw_bytes)
def test_no_malformed_body_gets_a_5xx(client: httpx.Client, body: bytes) -> None:
    check(client.post("/translate", content=body, headers={"content-type": "application/json"}))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies)
def test_no_malformed_object_gets_a_5xx(client: httpx.Client, body: dict[str, Any]) -> None:
    check(client.post("/translate", content=encode(body)))

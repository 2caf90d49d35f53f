"""`model` on /translate (what the edge routes by with several pools): the served name, or a 404."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from hunyuan_serve.replica.app import create_app
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready

GOOD = {"text": "Hello", "source_lang": "en", "target_lang": "zh"}


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    app = create_app(FakeEngine(), make_config(), "hunyuan")  # the fake engine serves "fake"
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_ready(client)
        yield client


def test_the_served_model_is_answered_single_and_batch(http: httpx.Client) -> None:
    one = http.post("/translate", json={**GOOD, "model": "fake"})
    assert one.status_code == 200 and one.json()["model"] == "fake", one.text
    batch = {"texts": ["a", "b"], "source_lang": "en", "target_lang": "zh", "model": "fake"}
    assert http.post("/translate", json=batch).status_code == 200


@pytest.mark.parametrize(
    ("model", "status", "code"), [("other", 404, "model_not_found"), (7, 422, "invalid_parameter")]
)
def test_another_model_is_refused_in_the_native_shape(
    http: httpx.Client, model: object, status: int, code: str
) -> None:
    answer = http.post("/translate", content=json.dumps({**GOOD, "model": model}))
    assert answer.status_code == status and answer.json()["error"]["code"] == code, answer.text
    assert set(answer.json()) == {"error"} and "model" in answer.json()["error"]["message"]

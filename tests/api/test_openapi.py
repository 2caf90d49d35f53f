"""The OpenAPI document against the code: routes and their methods, each API's error shape, bodies."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest
from fastapi.routing import APIRoute
from starlette.routing import Route

from hunyuan_serve.edge.dialects import DIALECTS, EDGE_ERRORS, ROUTE_METHODS
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.openapi import HIDDEN, OPERATIONS, error_schema
from hunyuan_serve.replica.schema import parse_fields
from tests.replica.replica_fakes import FakeEngine, make_config


@pytest.fixture(scope="module")
def app() -> Any:
    return create_app(FakeEngine(), make_config(max_batch_texts=3), "hunyuan")


def test_every_route_is_in_the_edges_method_table(app: Any) -> None:
    routes: dict[str, set[str]] = {}
    for route in app.routes:
        if isinstance(route, (APIRoute, Route)) and route.methods:
            routes.setdefault(route.path, set()).update(route.methods - {"HEAD"})
    assert routes == {path: set(methods) for path, methods in ROUTE_METHODS.items()}


def test_every_operation_is_declared_with_the_gates_and_edges_statuses(app: Any) -> None:
    spec = app.openapi()
    assert not set(HIDDEN) & set(spec["paths"])
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            assert (method, path) in OPERATIONS, (method, path)
            if path != "/health":  # Nginx's own: no key, no limit
                assert {"429", "503", "504"} <= set(operation["responses"]), (method, path)
            if "requestBody" in operation:
                assert "413" in operation["responses"], (method, path)


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
def test_each_apis_error_bodies_match_its_declared_schema(dialect: Any) -> None:
    validator = jsonschema_rs.validator_for(error_schema(dialect))
    for code, (status, message) in EDGE_ERRORS.items():
        assert validator.is_valid(dialect.error(code, message, status))
    assert not validator.is_valid({"detail": "FastAPI's shape is not ours"})


BODIES: list[dict[str, Any]] = [
    {"text": "Hello", "target_lang": "de"},
    {"texts": ["a", "b"], "source_lang": "en", "target_lang": "fr", "temperature": 0.5},
    {"text": "x", "tgt_lang": "de", "top_k": -1, "max_tokens": 4, "priority": "bulk"},
    {"text": "x", "target_lang": "de", "top_k": 0},
    {"text": "x", "target_lang": "de", "temperature": 2.5},
    {"text": "x", "target_lang": "de", "top_p": 0},
    {"text": "   ", "target_lang": "de"},
    {"text": "a\x00b", "target_lang": "de"},
    {"texts": ["a", "b", "c", "d"], "target_lang": "de"},
    {"texts": [], "target_lang": "de"},
    {"text": "x", "texts": ["y"], "target_lang": "de"},
    {"text": "x"},
    {"text": "x", "target_lang": "de", "unknown": 1},
    {"texts": ["x"], "target_lang": "de", "stream": True},
    {"text": "x", "target_lang": "de", "stream": "yes"},
    {"text": "x", "target_lang": "de", "max_tokens": 5000},
]


@pytest.mark.parametrize("body", BODIES, ids=str)
def test_the_translate_body_schema_refuses_what_the_parser_refuses(app: Any, body: dict[str, Any]) -> None:
    schema = app.openapi()["paths"]["/translate"]["post"]["requestBody"]["content"]["application/json"]
    replica = app.state.replica
    try:
        parse_fields(body, replica.cfg, replica.sampling, replica.engine.max_model_len)
        accepted = True
    except ApiError:
        accepted = False
    assert jsonschema_rs.validator_for(schema["schema"]).is_valid(body) == accepted

"""The OpenAPI document against the code: routes and their methods, each API's error shape, bodies."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from fastapi.routing import APIRoute
from starlette.routing import Route

from hunyuan_serve.edge.dialects import DIALECTS, EDGE_ERRORS, ROUTE_METHODS
from hunyuan_serve.families import HY_MT15
from hunyuan_serve.replica.apis import registry
from hunyuan_serve.replica.apis.openai_schema import parse_chat
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.documents import jobs as documents
from hunyuan_serve.replica.errors import ApiError, renderer
from hunyuan_serve.replica.openapi.document import error_schema
from hunyuan_serve.replica.schema import parse_fields
from tests.support.replica_fakes import FakeEngine, make_config


@pytest.fixture(scope="module")
def app() -> Any:
    return create_app(FakeEngine(), make_config(max_batch_texts=3), "hunyuan")


def test_every_route_is_in_the_edges_method_table(app: Any) -> None:
    routes: dict[str, set[str]] = {}
    for route in app.routes:
        if isinstance(route, (APIRoute, Route)) and route.methods:
            routes.setdefault(route.path, set()).update(route.methods - {"HEAD"})
    assert routes == {path: set(methods) for path, methods in ROUTE_METHODS.items()}


def test_every_route_of_the_app_is_declared_by_exactly_one_api(app: Any) -> None:
    paths = {route.path for route in app.routes if isinstance(route, (APIRoute, Route)) and route.methods}
    owners = {path: [d.name for d in DIALECTS if path in d.routes] for path in paths}
    assert {path: names for path, names in owners.items() if len(names) != 1} == {}


def test_every_operation_is_declared_with_the_gates_and_edges_statuses(app: Any) -> None:
    spec = app.openapi()
    operations = registry.operations()
    # Not the front's: a Chimera pool's /fuse is reached through /_hs/pool/ only, /metrics is Prometheus'.
    assert not {"/fuse", "/metrics"} & set(spec["paths"])
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            assert (method, path) in operations, (method, path)
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
    {"text": "x", "target_lang": "de", "qa": "retry"},
    {"text": "x", "target_lang": "de", "qa": "always"},
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


# -- the statuses the code raises, by the modules each translating operation runs through -------------

REPLICA = Path(__file__).resolve().parents[2] / "hunyuan_serve" / "replica"
# What every translating request passes: admission and deadline, parsing, the core, billing, fusion.
CORE = ("http.py", "admission/gate.py", "schema.py", "service.py", "errors.py", "admission/priority.py")
CORE += ("usage.py", "ensemble.py")
CORE += ("apis/sse.py", "review.py")
ADAPTERS = {
    ("post", "/translate"): ("apis/native.py", "apis/compat.py"),
    ("post", "/v1/chat/completions"): ("apis/openai.py", "apis/openai_schema.py"),
    ("post", "/v1/completions"): ("apis/openai.py", "apis/openai_schema.py"),
    ("post", "/v2/translate"): ("apis/deepl.py", "apis/compat.py", "apis/deepl_glossaries.py"),
    ("post", "/libretranslate/translate"): ("apis/libretranslate.py", "apis/compat.py"),
    ("post", "/immersive/translate"): ("apis/immersive.py", "apis/compat.py"),
}
# Functions no call from that operation reaches: the `model` check is native /translate's and OpenAI's.
# LibreTranslate's module also holds its file calls, which are operations of their own.
NOT_REACHED = {
    "/libretranslate/translate": {"check_requested_model", "_translate_file", "_download"},
    "/immersive/translate": {"check_requested_model"},
}
NOT_REACHED["/v2/translate"] = {"check_requested_model"}


def defined(module: Path) -> set[str]:
    return {
        node.name
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_every_function_left_unwalked_still_exists() -> None:
    # A renamed function would drop out of the skip list silently and be walked again.
    for path, skip in NOT_REACHED.items():
        modules = (*CORE, *ADAPTERS[("post", path)])
        assert skip <= set().union(*(defined(REPLICA / name) for name in modules)), path


def raised(module: Path, skip: set[str]) -> set[int]:
    """The literal statuses of every ApiError(status, ...) the module makes, outside `skip`'s functions."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    out: set[int] = set()
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef) and func.name not in skip:
            for node in ast.walk(func):
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", "") == "ApiError"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                ):
                    out.add(int(node.args[0].value))
    return out


@pytest.mark.parametrize("key", list(ADAPTERS), ids=lambda k: k[1])
def test_each_status_the_code_raises_is_declared_as_its_api_answers_it(app: Any, key: Any) -> None:
    method, path = key
    skip = NOT_REACHED.get(path, set())
    statuses = set().union(*(raised(REPLICA / name, skip) for name in (*CORE, *ADAPTERS[key])))
    assert {400, 413, 503, 504} <= statuses  # the walk found the gate's and the parsers' refusals
    render = renderer(path)
    answered = {render(ApiError(status, "any", "")).status_code for status in statuses}
    declared = {int(status) for status in app.openapi()["paths"][path][method]["responses"]}
    assert answered <= declared, sorted(answered - declared)


USER = {"role": "user", "content": "Hi"}
CHATS: list[dict[str, Any]] = [
    {"messages": [USER]},
    {"messages": [{"role": "system", "content": "Be brief"}, USER], "temperature": 1, "stop": ["\n"]},
    {"messages": [USER], "n": 1, "logprobs": False, "user": "u-1", "max_completion_tokens": 5},
    {"messages": [USER], "stream": True, "stream_options": {"include_usage": True}},
    {"messages": []},
    {"messages": [{"role": "assistant", "content": "x"}]},
    {"messages": [{"role": {}, "content": "x"}, USER]},
    {"messages": [USER], "n": 2},
    {"messages": [USER], "logprobs": 0},
    {"messages": [USER], "stop": ["a", "b", "c", "d", "e"]},
    {"messages": [USER], "frequency_penalty": 3},
    {"messages": [USER], "unknown": True},
    {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
]


@pytest.mark.parametrize("body", CHATS, ids=str)
def test_the_chat_body_schema_refuses_what_the_parser_refuses(app: Any, body: dict[str, Any]) -> None:
    content = app.openapi()["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]
    try:
        parse_chat(json.dumps(body).encode(), app.state.replica)
        accepted = True
    except ApiError:
        accepted = False
    assert jsonschema_rs.validator_for(content["application/json"]["schema"]).is_valid(body) == accepted


def test_deepls_empty_source_lang_is_declared_as_the_parser_reads_it(app: Any) -> None:
    """`source_lang=`, a form's field left empty, is detection as absent or null is: declared so."""
    content = app.openapi()["paths"]["/v2/translate"]["post"]["requestBody"]["content"]
    for media in ("application/json", "application/x-www-form-urlencoded"):
        validator = jsonschema_rs.validator_for(content[media]["schema"])
        assert validator.is_valid({"text": "x", "target_lang": "DE", "source_lang": ""}), media
        assert not validator.is_valid({"text": "x", "target_lang": "DE", "source_lang": "XX"}), media


@pytest.mark.parametrize("path", ["/v2/document", "/libretranslate/translate_file"])
def test_the_upload_schemas_name_the_files_the_code_takes(app: Any, path: str) -> None:
    """Which bytes make a document no JSON Schema says: the file part names the endings format_of takes,
    and the 400 for any other is declared."""
    operation = app.openapi()["paths"][path]["post"]
    part = operation["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"]["file"]
    named = set(part["description"].split(": ", 1)[1].split(". ", 1)[0].split())
    assert named == set(documents._ENDINGS)
    for ending in named:
        documents.format_of("notes" + ending)
    with pytest.raises(documents.UploadInvalid, match=r"'\.png' is not supported"):
        documents.format_of("file.png")
    assert "400" in operation["responses"]


def test_deepls_glossary_schemas_refuse_what_the_code_refuses(app: Any) -> None:
    """One language twice is refused (no pair lists it); a glossary_id needs a source_lang."""
    paths = app.openapi()["paths"]

    def validator(path: str, spec: Any = None) -> Any:
        content = (spec or paths)[path]["post"]["requestBody"]["content"]["application/json"]
        return jsonschema_rs.validator_for(content["schema"])

    pair = {"source_lang": "en", "target_lang": "de", "entries": "a\tb"}
    v2, v3 = validator("/v2/glossaries"), validator("/v3/glossaries")
    assert v2.is_valid({"name": "n", **pair}) and not v2.is_valid({"name": "n", **pair, "target_lang": "en"})
    assert v3.is_valid({"name": "n", "dictionaries": [pair]})
    assert not v3.is_valid({"name": "n", "dictionaries": [{**pair, "source_lang": "de"}]})
    glossaries = create_app(FakeEngine(), make_config(), HY_MT15).openapi()["paths"]
    translate = validator("/v2/translate", glossaries)
    body = {"text": "x", "target_lang": "DE", "glossary_id": "g"}
    assert translate.is_valid({**body, "source_lang": "EN"})
    assert not translate.is_valid(body) and not translate.is_valid({**body, "source_lang": ""})

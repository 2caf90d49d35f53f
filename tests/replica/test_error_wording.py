"""Error shapes and wording: one OpenAI shape for the replica and Nginx, each API's own words for a key,
refusals that name the parameter as sent and list all that is accepted."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.edge import dialects
from hunyuan_serve.families import HUNYUAN_MT
from hunyuan_serve.localization.formats import FORMATS
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.documents import jobs as documents
from hunyuan_serve.replica.errors import ApiError, render_error
from tests.support.replica_fakes import FakeEngine, serve_in_thread, wait_ready

KEY = "sk-wording-test-3c2b1a"
OPENAI_FIELDS = {"message", "type", "param", "code"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A replica of a family without a style prompt, behind a keys file."""
    keys = tmp_path_factory.mktemp("wording") / "keys.txt"
    keys.write_text(KEY + "\n")
    cfg = ServeConfig.model_validate({"replica": {"cache_entries": 0}, "auth": {"keys_file": str(keys)}})
    app = create_app(FakeEngine(), cfg, HUNYUAN_MT)
    keyed = {"Authorization": f"Bearer {KEY}"}
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=10, headers=keyed) as http:
        wait_ready(http)
        yield http


def keyless(client: httpx.Client, path: str, body: dict[str, object]) -> httpx.Response:
    """A POST without the client's key."""
    return httpx.post(str(client.base_url).rstrip("/") + path, json=body, trust_env=False, timeout=10)


def test_openai_key_refusals_have_every_field_param_null(client: httpx.Client) -> None:
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    missing = keyless(client, "/v1/chat/completions", chat)
    wrong = client.post("/v1/chat/completions", json=chat, headers={"Authorization": "Bearer nope"})
    for refused in (missing, wrong):
        assert refused.status_code == 401, refused.text
        error = refused.json()["error"]
        assert set(error) == OPENAI_FIELDS and error["param"] is None, error
        assert (error["code"], error["type"]) == ("invalid_api_key", "invalid_request_error")


@pytest.mark.parametrize(
    "code", [*dialects.EDGE_ERRORS, *dialects.POOL_ERRORS, "overloaded", "model_not_found"]
)
def test_nginx_and_the_replica_answer_openai_errors_from_one_definition(code: str) -> None:
    status = dialects.edge_status(code) if code != "overloaded" else 503
    from_replica = render_error(dialects.OPENAI, ApiError(status, code, "why")).body
    edge = dialects.OPENAI.error(code, "why", status)
    assert from_replica == httpx.Response(200, json=edge).content
    assert set(edge["error"]) == OPENAI_FIELDS
    assert edge["error"]["param"] == ("model" if code == "model_not_found" else None)


def test_libretranslate_key_refusals_are_libretranslates_words(client: httpx.Client) -> None:
    body = {"q": "Hello", "source": "en", "target": "zh"}
    missing = keyless(client, "/libretranslate/translate", body)
    wrong = keyless(client, "/libretranslate/translate", {**body, "api_key": "nope"})
    # libretranslate/app.py: "Please contact the server operator to get an API key", "Invalid API key".
    assert (missing.status_code, missing.json()) == (
        403,
        {"error": "Please contact the server operator to get an API key"},
    )
    assert (wrong.status_code, wrong.json()) == (403, {"error": "Invalid API key"})


def test_an_unsupported_parameter_is_named_whole_never_cut(client: httpx.Client) -> None:
    tools = [{"type": "function", "function": {"name": "lookup_the_weather", "parameters": {}}}]
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    long = client.post("/v1/chat/completions", json={**chat, "tools": tools})
    assert long.status_code == 400
    assert (
        long.json()["error"]["message"] == "tools is not supported here; send null or [], or leave tools out"
    )
    short = client.post("/v1/chat/completions", json={**chat, "n": 2})
    assert short.json()["error"]["message"] == "n=2 is not supported here; send null or 1, or leave n out"


def test_deepl_names_custom_instructions_not_the_cores_style(client: httpx.Client) -> None:
    body = {"text": ["Hello"], "target_lang": "ZH", "custom_instructions": ["Be formal"]}
    refused = client.post("/v2/translate", json=body)
    assert refused.status_code == 400, refused.text
    message = refused.json()["message"]
    assert message.startswith(f"prompt family {HUNYUAN_MT} has no official prompt for custom_instructions;")
    assert "style" not in message
    native = client.post(
        "/translate", json={"text": "Hello", "source_lang": "en", "target_lang": "zh", "style": "x"}
    )
    assert "no official prompt for style;" in native.json()["error"]["message"]


def test_the_unknown_extension_refusal_lists_every_name_a_job_takes(tmp_path: Path) -> None:
    with pytest.raises(documents.UploadInvalid) as refused:
        documents.check_upload("slides.pptx", b"x", 100)
    listed = re.search(r"\(supported: (.*)\)\.$", refused.value.message)
    assert listed is not None, refused.value.message
    endings = listed.group(1).split(" ")
    expected = {ending for info in FORMATS.values() for ending in info.extensions} | {".docx"}
    assert set(endings) == expected and "strings.xml" in endings
    for ending in endings:  # each one listed is taken
        name = f"res/values/{ending}" if not ending.startswith(".") else f"file{ending}"
        assert documents.check_upload(name, b"x", 100)

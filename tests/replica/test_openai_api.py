"""The OpenAI-compatible routes and `stream: true` over real HTTP with a scripted engine: shapes, folding,
Weblate's packed strings, sampling, streaming, aborts on disconnect, and every refusal in OpenAI's shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hunyuan_serve.families import HUNYUAN_MT, HY_MT15, sampling_defaults
from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.languages import find_language
from hunyuan_serve.replica.apis.openai_schema import _CHAT_KEYS, WEBLATE_SEPARATOR, fold_system
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.errors import ApiError
from tests.support.bodies import encode, raw_bytes, values
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready, wait_until

MAX_MESSAGES = 4


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeEngine, httpx.Client]]:
    engine = FakeEngine()
    cfg = make_config(max_batch_texts=4, max_chat_messages=MAX_MESSAGES, max_tokens=16)
    app = create_app(engine, cfg, "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_ready(client)
        yield engine, client


def chat(**body: Any) -> dict[str, Any]:
    return {"model": "fake", "messages": [{"role": "user", "content": "Translate: hello"}], **body}


def events(response: httpx.Response) -> list[Any]:
    """The `data:` payloads of an SSE body, JSON decoded except [DONE]."""
    out: list[Any] = []
    for block in response.text.split("\n\n"):
        if block.startswith("data: "):
            data = block.removeprefix("data: ")
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def openai_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    assert error["type"] == ("server_error" if status >= 500 else "invalid_request_error")
    return dict(error)


def test_models_lists_the_served_model_and_refuses_another(fake: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = fake
    listed = client.get("/v1/models").json()
    assert listed["object"] == "list" and [m["id"] for m in listed["data"]] == ["fake"]
    assert client.get("/v1/models/fake").json()["id"] == "fake"
    openai_error(client.get("/v1/models/gpt-4o"), 404, "model_not_found")
    error = openai_error(
        client.post("/v1/chat/completions", json=chat(model="gpt-4o")), 404, "model_not_found"
    )
    assert "gpt-4o" in error["message"] and "fake" in error["message"]


def test_unknown_routes_and_methods_under_v1_answer_in_openai_shape(
    fake: tuple[FakeEngine, httpx.Client],
) -> None:
    _, client = fake
    openai_error(client.get("/v1/embeddings"), 404, "not_found")
    openai_error(client.get("/v1/chat/completions"), 405, "method_not_allowed")


def test_chat_sends_the_content_as_is_with_system_text_folded_first(
    fake: tuple[FakeEngine, httpx.Client],
) -> None:
    engine, client = fake
    messages = [
        {"role": "system", "content": "Translate into French."},
        {"role": "user", "content": [{"type": "text", "text": "Good morning"}]},
    ]
    answer = client.post("/v1/chat/completions", json=chat(messages=messages)).json()
    folded = "Translate into French.\n\nGood morning"
    assert engine.given[-1].messages == ({"role": "user", "content": folded},)
    assert answer["object"] == "chat.completion" and answer["model"] == "fake"
    choice = answer["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": f"<{len(folded)}>"}
    assert choice["finish_reason"] == "stop"
    assert answer["usage"] == {
        "prompt_tokens": len(folded),
        "completion_tokens": 1,
        "total_tokens": len(folded) + 1,
    }


def test_fold_system_modes() -> None:
    messages = [("system", "S1"), ("user", "u1"), ("assistant", "a1"), ("developer", "S2"), ("user", "u2")]
    assert fold_system(messages, "prepend") == (
        {"role": "user", "content": "S1\n\nS2\n\nu1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"},
    )
    assert fold_system(messages, "drop")[0] == {"role": "user", "content": "u1"}
    with pytest.raises(ApiError, match="system_prompt_mode reject"):
        fold_system(messages, "reject")
    assert fold_system([("user", "u")], "reject") == ({"role": "user", "content": "u"},)


def test_sampling_fields_map_and_the_family_defaults_fill_the_rest(
    fake: tuple[FakeEngine, httpx.Client],
) -> None:
    engine, client = fake
    client.post("/v1/chat/completions", json=chat()).raise_for_status()
    defaults = sampling_defaults(HUNYUAN_MT)
    sent = engine.samplings[-1]
    assert (sent.temperature, sent.top_p, sent.top_k, sent.repetition_penalty) == (
        defaults.temperature,
        defaults.top_p,
        defaults.top_k,
        defaults.repetition_penalty,
    )
    assert (sent.max_tokens, sent.presence_penalty, sent.frequency_penalty) == (16, 0.0, 0.0)
    body = chat(temperature=0, top_p=0.5, max_completion_tokens=7, top_k=5, repetition_penalty=1.2)
    body.update(presence_penalty=0.5, frequency_penalty=-0.5, stop=["\n\n"])
    client.post("/v1/chat/completions", json=body).raise_for_status()
    sent = engine.samplings[-1]
    assert (sent.temperature, sent.top_p, sent.top_k, sent.repetition_penalty, sent.max_tokens) == (
        0,
        0.5,
        5,
        1.2,
        7,
    )
    assert (sent.presence_penalty, sent.frequency_penalty) == (0.5, -0.5)
    assert engine.given[-1].stop == ("\n\n",)


def test_chat_stream_is_sse_with_role_text_finish_usage_and_done(
    fake: tuple[FakeEngine, httpx.Client],
) -> None:
    _, client = fake
    body = chat(
        stream=True, stream_options={"include_usage": True}, messages=[{"role": "user", "content": "abc"}]
    )
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-accel-buffering"] == "no" and response.headers["cache-control"] == "no-cache"
    got = events(response)
    assert got[-1] == "[DONE]"
    chunks = got[:-1]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "<3>"
    content_chunks = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(content_chunks) == 2  # the scripted engine's two deltas, each sent as it came
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "total_tokens": 5,
    }
    without = events(client.post("/v1/chat/completions", json=chat(stream=True, messages=body["messages"])))
    assert all("usage" not in c for c in without[:-1])


def test_a_client_leaving_a_stream_aborts_the_engine_request(fake: tuple[FakeEngine, httpx.Client]) -> None:
    engine, client = fake
    engine.hold()
    try:
        body = chat(stream=True, messages=[{"role": "user", "content": "left early"}])
        with client.stream("POST", "/v1/chat/completions", json=body) as response:
            lines = response.iter_lines()
            for line in lines:
                if '"content": "<"' in line:
                    break
            assert engine.running, "the stream's engine request should be running"
            running = set(engine.running)
        wait_until(lambda: running <= set(engine.aborted), what="the engine request aborted")
    finally:
        engine.let_go()


def test_weblate_strings_are_translated_one_prompt_each_and_joined(
    fake: tuple[FakeEngine, httpx.Client],
) -> None:
    engine, client = fake
    system = (
        "\nYou are a highly skilled translation assistant, adept at translating text\n"
        "from language 'en'\nto language 'zh_Hans'\nwith precision and nuance.\n\n\n"
        "You always reply with translated string only.\n"
    )
    strings = ["Save changes", "", "Open file"]
    before = len(engine.given)
    body = {
        "model": "fake",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": WEBLATE_SEPARATOR.join(strings)},
        ],
        "temperature": 0,
        "frequency_penalty": 0,
        "presence_penalty": 0,
    }
    answer = client.post("/v1/chat/completions", json=body).json()
    en, zh = find_language("en"), find_language("zh")
    expected = [build_prompt(HUNYUAN_MT, en, zh, text) for text in ("Save changes", "Open file")]
    sent = sorted(p.messages[0]["content"] for p in engine.given[before:])
    assert sent == sorted(p.messages[0]["content"] for p in expected)
    parts = answer["choices"][0]["message"]["content"].split(WEBLATE_SEPARATOR)
    lengths = [len(p.messages[0]["content"]) for p in expected]
    assert parts == [f"<{lengths[0]}>", "", f"<{lengths[1]}>"]
    streamed = events(client.post("/v1/chat/completions", json={**body, "stream": True}))
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in streamed[:-1] if c["choices"])
    assert text.split(WEBLATE_SEPARATOR) == parts


WEBLATE_SYSTEM = (
    "\nYou are a highly skilled translation assistant, adept at translating text\n"
    "from language 'en'\nto language 'de'\nwith precision and nuance.\n\n\n"
    "You always reply with translated string only.\n"
    "\nUse the following glossary during the translation:\nSave\tSpeichern\nfile\tDatei\n\n"
)


def weblate_body(strings: list[str]) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": WEBLATE_SYSTEM},
        {"role": "user", "content": WEBLATE_SEPARATOR.join(strings)},
    ]
    return {"model": "fake", "messages": messages, "temperature": 0}


def test_weblate_glossary_reaches_a_family_with_a_terminology_prompt() -> None:
    engine = FakeEngine()
    with (
        serve_in_thread(create_app(engine, make_config(), HY_MT15)) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        wait_ready(client)
        before = len(engine.given)  # past the warm-up's prompt
        body = weblate_body(["Save changes", "Close it"])
        client.post("/v1/chat/completions", json=body).raise_for_status()
    en, de = find_language("en"), find_language("de")
    expected = {
        build_prompt(HY_MT15, en, de, "Save changes", glossary={"Save": "Speichern"}).messages[0]["content"],
        build_prompt(HY_MT15, en, de, "Close it").messages[0]["content"],
    }
    assert {p.messages[0]["content"] for p in engine.given[before:]} == expected


def test_weblate_glossary_is_left_out_for_a_family_without_one(fake: tuple[FakeEngine, httpx.Client]) -> None:
    engine, client = fake
    before = len(engine.given)
    client.post("/v1/chat/completions", json=weblate_body(["Save the file"])).raise_for_status()
    plain = build_prompt(HUNYUAN_MT, find_language("en"), find_language("de"), "Save the file")
    assert [p.messages for p in engine.given[before:]] == [plain.messages]


def test_weblate_with_a_language_we_lack_is_refused(fake: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = fake
    system = "from language 'en'\nto language 'tlh'"
    body = chat(messages=[{"role": "system", "content": system}, {"role": "user", "content": "a"}])
    assert (
        "tlh"
        in openai_error(client.post("/v1/chat/completions", json=body), 400, "unsupported_language")[
            "message"
        ]
    )


def test_completions_one_prompt_a_list_and_a_stream(fake: tuple[FakeEngine, httpx.Client]) -> None:
    engine, client = fake
    one = client.post("/v1/completions", json={"model": "fake", "prompt": "abcd"}).json()
    assert one["object"] == "text_completion" and one["choices"][0]["text"] == "<4>"
    assert engine.given[-1].text == "abcd" and not engine.given[-1].is_chat
    two = client.post("/v1/completions", json={"prompt": ["a", "bb"]}).json()
    assert [(c["index"], c["text"]) for c in two["choices"]] == [(0, "<1>"), (1, "<2>")]
    streamed = events(client.post("/v1/completions", json={"prompt": "xyz12", "stream": True}))
    assert streamed[-1] == "[DONE]"
    assert "".join(c["choices"][0]["text"] for c in streamed[:-1]) == "<5>"


def test_translate_stream_sends_partial_text_then_the_answer(fake: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = fake
    body = {"text": "Hello stream", "source_lang": "en", "target_lang": "fr", "stream": True}
    response = client.post("/translate", json=body)
    assert response.headers["x-accel-buffering"] == "no"
    got = events(response)
    deltas = [e["delta"] for e in got if "delta" in e]
    assert len(deltas) == 2
    done = got[-1]
    assert done["done"] is True and done["result"] == "".join(deltas) and done["cached"] is False
    again = events(client.post("/translate", json=body))
    assert again[-1]["cached"] is True and again[-1]["result"] == done["result"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"text": "a", "texts": None}, "missing_field"),
        ({"texts": ["a", "b"], "stream": True}, "invalid_parameter"),
        ({"text": "a", "stream": "yes"}, "invalid_parameter"),
        ({"text": "https://example.com/" + "x" * 2000, "stream": True}, "text_too_long"),  # never cut
    ],
)
def test_translate_stream_refusals_are_plain_errors(
    fake: tuple[FakeEngine, httpx.Client], body: dict[str, Any], code: str
) -> None:
    _, client = fake
    response = client.post("/translate", json={"source_lang": "en", "target_lang": "zh", **body})
    assert 400 <= response.status_code < 500
    assert response.json()["error"]["code"] == code


USER = [{"role": "user", "content": "hi"}]
BAD_CHATS: list[tuple[Any, str, str]] = [
    (b'{"model": "fake", "messages": [', "invalid_json", ""),
    (b"\xff\xfe", "invalid_encoding", ""),
    ([1, 2], "invalid_request", ""),
    ({"model": "fake"}, "invalid_parameter", "messages"),
    ({"messages": []}, "empty_messages", "messages"),
    ({"messages": "hi"}, "invalid_parameter", "messages"),
    ({"messages": [{"role": "user", "content": 5}]}, "invalid_parameter", "content"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "unsupported_role", "role"),
    ({"messages": [{"role": "assistant", "content": "x"}]}, "missing_user_message", "user"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "unsupported_content", "text"),
    ({"messages": USER * (MAX_MESSAGES + 1)}, "too_many_messages", "max_chat_messages"),
    ({"messages": USER, "n": 2}, "unsupported_parameter", "n="),
    ({"messages": USER, "tools": [{"type": "function"}]}, "unsupported_parameter", "tools"),
    ({"messages": USER, "logprobs": True}, "unsupported_parameter", "logprobs"),
    (
        {"messages": USER, "response_format": {"type": "json_object"}},
        "unsupported_response_format",
        "translation model",
    ),
    ({"messages": USER, "frobnicate": 1}, "unknown_parameter", "frobnicate"),
    ({"messages": USER, "temperature": "hot"}, "invalid_parameter", "temperature"),
    ({"messages": USER, "presence_penalty": 3}, "invalid_parameter", "presence_penalty"),
    ({"messages": USER, "stop": ["a"] * 5}, "invalid_parameter", "stop"),
    ({"messages": USER, "stream": "yes"}, "invalid_parameter", "stream"),
    ({"messages": USER, "stream_options": {"include_usage": 1}}, "invalid_parameter", "include_usage"),
    ({"messages": USER, "model": 3}, "invalid_parameter", "model"),
    ({"messages": [{"role": "user", "content": "a\x00b"}]}, "invalid_text", "NUL"),
]


@pytest.mark.parametrize(("body", "code", "named"), BAD_CHATS)
def test_bad_chat_requests_are_400_in_openai_shape(
    fake: tuple[FakeEngine, httpx.Client], body: Any, code: str, named: str
) -> None:
    _, client = fake
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    error = openai_error(client.post("/v1/chat/completions", content=content), 400, code)
    assert named in error["message"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"prompt": []}, "invalid_parameter"),
        ({"prompt": [1, 2]}, "invalid_parameter"),
        ({"prompt": " "}, "invalid_parameter"),
        ({"prompt": ["a"] * 5}, "too_many_prompts"),
        ({"prompt": ["a", "b"], "stream": True}, "unsupported_parameter"),
        ({"prompt": "a", "echo": True}, "unsupported_parameter"),
        ({"prompt": "a", "messages": USER}, "unknown_parameter"),
    ],
)
def test_bad_completion_requests_are_400(fake: tuple[FakeEngine, httpx.Client], body: Any, code: str) -> None:
    _, client = fake
    openai_error(client.post("/v1/completions", json=body), 400, code)


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_over_the_budget_is_a_413_before_any_byte(
    fake: tuple[FakeEngine, httpx.Client], stream: bool
) -> None:
    _, client = fake
    body = chat(stream=stream, messages=[{"role": "user", "content": "x" * 2000}])
    error = openai_error(client.post("/v1/chat/completions", json=body), 413, "context_length_exceeded")
    assert "1000" in error["message"]


def check_openai(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        error = response.json()["error"]
        assert {"message", "type", "code"} <= set(error) and error["message"]


chat_bodies = st.fixed_dictionaries(
    {},
    optional={
        "messages": st.one_of(
            values,
            st.lists(
                st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "x"]), "content": values})
            ),
        ),
        **{key: values for key in sorted(_CHAT_KEYS - {"messages"})[:12]},
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(raw_bytes, chat_bodies.map(encode)))
def test_no_malformed_chat_gets_a_5xx(fake: tuple[FakeEngine, httpx.Client], body: bytes) -> None:
    _, client = fake
    check_openai(client.post("/v1/chat/completions", content=body))
    check_openai(client.post("/v1/completions", content=body))

"""Weblate 2026's structured localization task, Tolgee's and SubtitleEdit's chats on /v1/chat/completions,
over real HTTP with a scripted engine: the prompts the engine gets and the JSON answered."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hunyuan_serve.families import HY_MT15
from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.languages import find_language
from hunyuan_serve.replica.app import create_app
from tests.support import tool_chats
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready
from tests.support.tool_chats import TOLGEE_SCHEMA

# Weblate 2026.10.1, weblate/machinery/openai.py (BaseOpenAITranslation.get_chat_payload): the system
# prompt (llm.py PROMPT, opening kept here), the worked example as a user/assistant pair, then the task.
WEBLATE_SYSTEM = (
    "\nYou are a professional translation engine specialized in structured localization tasks.\n\n"
    "Input is provided as JSON with the following schema:\n"
)
# llm.py LLM_NEUTRAL_PREVIOUS_EXAMPLE_SOURCES, as _build_previous_messages_from_examples sends them.
EXAMPLE_USER = json.dumps(
    {
        "source_language": "en",
        "target_language": "de",
        "glossary": [],
        "strings": [{"source": "Weblate", "parts": [{"type": "text", "text": "Weblate"}]}],
    }
)
EXAMPLE_ANSWER = json.dumps(["Weblate"])


def weblate_task(strings: list[str], glossary: list[dict[str, str]]) -> dict[str, Any]:
    task = {
        "source_language": "en",
        "target_language": "de",
        "glossary": glossary,
        "strings": [{"source": text, "parts": [{"type": "text", "text": text}]} for text in strings],
    }
    return {
        "model": "fake",
        "messages": [
            {"role": "system", "content": WEBLATE_SYSTEM},
            {"role": "user", "content": EXAMPLE_USER},
            {"role": "assistant", "content": EXAMPLE_ANSWER},
            {"role": "user", "content": json.dumps(task)},
        ],
    }


@pytest.fixture(scope="module")
def hy() -> Iterator[tuple[FakeEngine, httpx.Client]]:
    engine = FakeEngine()
    with (
        serve_in_thread(create_app_hy(engine)) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        wait_ready(client)
        yield engine, client


def create_app_hy(engine: FakeEngine) -> Any:
    return create_app(engine, make_config(max_batch_texts=8), HY_MT15)


def test_weblate_task_is_answered_with_a_json_array_built_here(hy: tuple[FakeEngine, httpx.Client]) -> None:
    engine, client = hy
    strings = ["Save @@PH1@@ now", "", "@@PH2@@", "Open <b>the file</b>"]
    glossary = [{"source": "Save", "target": "Speichern"}, {"source": "unused", "target": "x"}]
    before = len(engine.given)
    response = client.post("/v1/chat/completions", json=weblate_task(strings, glossary))
    assert response.status_code == 200, response.text
    answer = json.loads(response.json()["choices"][0]["message"]["content"])
    assert isinstance(answer, list) and len(answer) == len(strings)
    # The fake answers '<n>', n the prompt's length: placeholders and tags come back byte for byte.
    assert answer[1] == "" and answer[2] == "@@PH2@@"
    assert "@@PH1@@" in answer[0] and answer[3].startswith("<") and "<b>" in answer[3] and "</b>" in answer[3]
    en, de = find_language("en"), find_language("de")
    expected = {
        build_prompt(HY_MT15, en, de, "Save", glossary={"Save": "Speichern"}).messages[0]["content"],
        *(build_prompt(HY_MT15, en, de, text).messages[0]["content"] for text in ("now", "Open", "the file")),
    }
    sent = {p.messages[0]["content"] for p in engine.given[before:]}
    assert sent == expected  # the worked example's "Weblate" never reaches the engine


def test_weblate_task_streams_the_same_array(hy: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = hy
    body = {**weblate_task(["Close"], []), "stream": True}
    text = tool_chats.streamed_text(client.post("/v1/chat/completions", json=body))
    assert len(json.loads(text)) == 1


def test_weblate_task_over_the_batch_limit_is_refused(hy: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = hy
    response = client.post("/v1/chat/completions", json=weblate_task(["a b"] * 9, []))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "too_many_texts"


def tolgee_body(response_format: dict[str, Any] | None) -> dict[str, Any]:
    """A chat in Tolgee's body (an older commit's, with temperature 0 and stop) holding no Tolgee prompt."""
    body: dict[str, Any] = {
        "max_completion_tokens": 800,
        "stream": False,
        "stop": None,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
        "model": "fake",
        "temperature": 0,
    }
    return {**body, "response_format": response_format} if response_format else body


@pytest.mark.parametrize("fmt", [TOLGEE_SCHEMA, {"type": "json_object"}])
def test_a_json_response_format_of_no_known_task_is_refused_saying_why(
    hy: tuple[FakeEngine, httpx.Client], fmt: dict[str, Any]
) -> None:
    _, client = hy
    response = client.post("/v1/chat/completions", json=tolgee_body(fmt))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unsupported_response_format"
    assert "translation model" in error["message"] and "/v2/translate" in error["message"]


def test_tolgee_text_parts_and_max_completion_tokens_are_taken(hy: tuple[FakeEngine, httpx.Client]) -> None:
    engine, client = hy
    before = len(engine.samplings)
    response = client.post("/v1/chat/completions", json=tolgee_body(None))
    assert response.status_code == 200, response.text
    assert engine.samplings[before].max_tokens <= 800


# SubtitleEdit, src/libse/AutoTranslate/OpenAiCompatibleTranslate.cs at commit
# c5b84619ccde784f96f8d0a71c91edfa666010a4: {"model": ..., "messages": [{"role": "user", "content":
# prompt + "\n\n" + text}]}, the model left out when none is set.
def test_subtitleedit_chat_is_answered(hy: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = hy
    body = {"messages": [{"role": "user", "content": "Translate from en to de:\n\nGood morning"}]}
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"]


def _content(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    content: str = response.json()["choices"][0]["message"]["content"]
    return content


def _sent(engine: FakeEngine, before: int) -> set[str]:
    return {p.messages[0]["content"] for p in engine.given[before:]}


@pytest.mark.parametrize("schema", [True, False], ids=["json_schema", "no_format"])
def test_tolgees_default_prompt_is_answered_with_its_json_built_here(
    hy: tuple[FakeEngine, httpx.Client], schema: bool
) -> None:
    engine, client = hy
    text = f'Save "{{count}}" files\nnow ({"schema" if schema else "none"})'  # each its own: no cache hit
    body = tool_chats.tolgee(text, "English", "German", terms=(("files", "Dateien"),), schema=schema)
    before = len(engine.given)
    answer = json.loads(_content(client.post("/v1/chat/completions", json=body)))
    assert set(answer) == {"output", "contextDescription"} and answer["output"]
    en, de = find_language("en"), find_language("de")
    # Only the key's text reaches the model, in the family's terminology prompt: none of Tolgee's rules.
    expected = build_prompt(HY_MT15, en, de, text, glossary={"files": "Dateien"}).messages[0]["content"]
    assert _sent(engine, before) == {expected}


def test_subtitleedits_batch_is_answered_keyed_by_line_number(hy: tuple[FakeEngine, httpx.Client]) -> None:
    engine, client = hy
    lines = ["Good morning.", "<i>Where is he?</i>", "", "Run!"]
    history = (("Hello.", "Hallo."),)
    for fmt in ("json_schema", "json_object", "none"):
        body = tool_chats.subtitle_batch(lines, "English", "German", history=history, response_format=fmt)
        before = len(engine.given)
        answer = json.loads(tool_chats.streamed_text(client.post("/v1/chat/completions", json=body)))
        assert list(answer) == ["1", "2", "3", "4"], fmt
        assert answer["3"] == "" and all(answer[n] for n in ("1", "2", "4"))
        assert answer["2"].startswith("<i>") and answer["2"].endswith("</i>")
        sent = _sent(engine, before)
        assert not any("Hallo" in prompt or "subtitle translator" in prompt for prompt in sent)


def test_subtitleedits_batch_glossary_reaches_the_terminology_prompt(
    hy: tuple[FakeEngine, httpx.Client],
) -> None:
    engine, client = hy
    body = tool_chats.subtitle_batch(
        ["The Chief is here."], "English", "German", glossary=(("Chief", "Chef"),)
    )
    before = len(engine.given)
    client.post("/v1/chat/completions", json={**body, "stream": False})
    en, de = find_language("en"), find_language("de")
    expected = build_prompt(HY_MT15, en, de, "The Chief is here.", glossary={"Chief": "Chef"})
    assert _sent(engine, before) == {expected.messages[0]["content"]}


def test_subtitleedits_one_line_engine_gets_the_translation_alone(
    hy: tuple[FakeEngine, httpx.Client],
) -> None:
    engine, client = hy
    before = len(engine.given)
    content = _content(
        client.post("/v1/chat/completions", json=tool_chats.subtitle_line("Hi\nthere", "English", "German"))
    )
    assert content and "keep punctuation" not in content
    en, de = find_language("en"), find_language("de")
    assert _sent(engine, before) == {
        build_prompt(HY_MT15, en, de, "Hi").messages[0]["content"],
        build_prompt(HY_MT15, en, de, "there").messages[0]["content"],
    }


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (tool_chats.tolgee("Hello", "English", "Klingon"), "Tolgee's prompt names"),
        (tool_chats.subtitle_batch(["Hi"], "Danish", "German"), "SubtitleEdit's prompt names"),
        (tool_chats.subtitle_batch(["a"] * 9, "English", "German"), "the limit is 8"),
    ],
)
def test_a_tools_task_it_cannot_do_is_refused_saying_why(
    hy: tuple[FakeEngine, httpx.Client], body: dict[str, Any], says: str
) -> None:
    _, client = hy
    response = client.post("/v1/chat/completions", json={**body, "stream": False})
    assert response.status_code == 400 and says in response.json()["error"]["message"], response.text


def test_a_tools_token_budget_is_for_its_whole_json_not_for_each_string(
    hy: tuple[FakeEngine, httpx.Client],
) -> None:
    engine, client = hy
    lines = [f"Line {n} of a batch long enough to size its budget past the context." for n in range(8)]
    batch = tool_chats.subtitle_batch(lines, "English", "German", response_format="json_object")
    assert batch["max_tokens"] > engine.max_model_len  # SubtitleEdit sizes it by the whole batch
    tolgee = {**tool_chats.tolgee("Budget", "English", "German"), "max_completion_tokens": 4000}
    before = len(engine.samplings)
    assert len(json.loads(tool_chats.streamed_text(client.post("/v1/chat/completions", json=batch)))) == 8
    assert json.loads(_content(client.post("/v1/chat/completions", json=tolgee)))["output"]
    assert all(s.max_tokens < engine.max_model_len for s in engine.samplings[before:])


@pytest.mark.parametrize(
    ("extra", "status"),
    [
        ({"repeat_penalty": 1.1}, 200),
        ({"repeat_penalty": -1}, 400),
        ({"repeat_penalty": -1, "repetition_penalty": 1.0}, 400),
    ],
)
def test_llamacpps_repeat_penalty_is_taken_as_repetition_penalty(
    hy: tuple[FakeEngine, httpx.Client], extra: dict[str, Any], status: int
) -> None:
    engine, client = hy
    before = len(engine.samplings)
    body = {
        "messages": [{"role": "user", "content": f"Hi {status} {len(extra)}"}],
        "cache_prompt": True,
        **extra,
    }
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == status, response.text
    if status == 200:
        assert engine.samplings[before].repetition_penalty == 1.1

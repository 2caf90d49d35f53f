"""Weblate 2026's structured localization task, Tolgee's and SubtitleEdit's chats on /v1/chat/completions,
over real HTTP with a scripted engine: the prompts the engine gets and the JSON answered."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready

from hunyuan_serve.families import HY_MT15
from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.languages import find_language
from hunyuan_serve.replica.app import create_app

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
    response = client.post("/v1/chat/completions", json=body)
    chunks = [
        json.loads(line.removeprefix("data: "))
        for line in response.text.split("\n\n")
        if line.startswith("data: {")
    ]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert len(json.loads(text)) == 1


def test_weblate_task_over_the_batch_limit_is_refused(hy: tuple[FakeEngine, httpx.Client]) -> None:
    _, client = hy
    response = client.post("/v1/chat/completions", json=weblate_task(["a b"] * 9, []))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "too_many_texts"


# Tolgee, ee/backend/app/src/main/kotlin/io/tolgee/ee/component/llm/OpenaiApiService.kt at commit
# 65950d2f04b894c61e344c2f92c61d2babdccaec: RequestBody(max_completion_tokens=800, stream=false,
# response_format (json_schema "simple_response" {output, contextDescription}, strict, or json_object),
# stop=null, messages (user), model, temperature=0).
TOLGEE_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "simple_response",
        "schema": {
            "type": "object",
            "properties": {"output": {"type": "string"}, "contextDescription": {"type": "string"}},
            "required": ["output", "contextDescription"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}


def tolgee_body(response_format: dict[str, Any] | None) -> dict[str, Any]:
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
def test_a_json_response_format_is_refused_saying_why(
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

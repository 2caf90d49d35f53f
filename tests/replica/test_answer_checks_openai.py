"""The answer checks in the OpenAI dialect, over a scripted engine: a flagged answer keeps OpenAI's shape
and says so in X-Hunyuan-QA, for plain completions, plain chats and Weblate's packed strings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hunyuan_serve.replica.apis.openai_schema import WEBLATE_SEPARATOR
from tests.support.qa_scripted import CHINESE, HEADER, Served, flag_counts, served

CHOICE_KEYS = {"completion": {"index", "text", "logprobs", "finish_reason"}}
CHOICE_KEYS["chat"] = {"index", "message", "logprobs", "finish_reason"}
WEBLATE_SYSTEM = (
    "\nYou are a highly skilled translation assistant, adept at translating text\n"
    "from language 'en'\nto language 'zh_Hans'\nwith precision and nuance.\n\n\n"
    "You always reply with translated string only.\n"
)


@pytest.fixture(scope="module")
def flagging() -> Iterator[Served]:
    with served(qa="flag") as pair:
        yield pair


def test_a_completion_that_loops_is_flagged_by_its_choice_index(flagging: Served) -> None:
    engine, client = flagging
    engine.script["Repeat after me"] = [("again and again and again and again and again", "stop")]
    body = {"model": "fake", "prompt": ["Say hello", "Repeat after me"], "max_tokens": 32}
    response = client.post("/v1/completions", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["object"] == "text_completion" and set(answer) == {
        "id",
        "object",
        "created",
        "model",
        "choices",
        "usage",
    }
    assert [set(choice) for choice in answer["choices"]] == [CHOICE_KEYS["completion"]] * 2
    assert answer["choices"][1]["text"] == "again and again and again and again and again"
    assert response.headers[HEADER] == "flagged 1/2: 1=loop"


def test_a_completion_cut_at_max_tokens_is_flagged_truncated(flagging: Served) -> None:
    engine, client = flagging
    engine.script["Tell a long story"] = [("Once upon a time", "length")]
    response = client.post("/v1/completions", json={"model": "fake", "prompt": "Tell a long story"})
    assert response.json()["choices"][0]["finish_reason"] == "length"
    assert response.headers[HEADER] == "flagged 1/1: 0=truncated"


def test_a_plain_chat_keeps_its_shape_and_carries_its_checks_in_the_header(flagging: Served) -> None:
    engine, client = flagging
    engine.script["Write a poem"] = [("roses roses roses roses roses", "length")]
    chat = {"model": "fake", "messages": [{"role": "user", "content": "Write a poem"}]}
    response = client.post("/v1/chat/completions", json=chat)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["object"] == "chat.completion" and [set(c) for c in answer["choices"]] == [
        CHOICE_KEYS["chat"]
    ]
    assert answer["choices"][0]["message"] == {
        "role": "assistant",
        "content": "roses roses roses roses roses",
    }
    assert response.headers[HEADER] == "flagged 1/1: 0=loop,truncated"
    fine = client.post(
        "/v1/chat/completions", json={**chat, "messages": [{"role": "user", "content": "Say hi"}]}
    )
    assert fine.headers[HEADER] == "ok"


def test_weblate_strings_are_checked_one_by_one_and_named_by_their_index(flagging: Served) -> None:
    engine, client = flagging
    engine.script["Delete 3 files"] = [("删除文件", "stop")]
    engine.script["Lock the layer, then save"] = [("锁定图层，锁定图层", "stop")]
    strings = ["Delete 3 files", "", "Open the file.", "Lock the layer, then save"]
    body = {
        "model": "fake",
        "messages": [
            {"role": "system", "content": WEBLATE_SYSTEM},
            {"role": "user", "content": WEBLATE_SEPARATOR.join(strings)},
        ],
    }
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    content = response.json()["choices"][0]["message"]["content"]
    # Weblate's strings come back joined as they were sent, the blank one as it came.
    assert content.split(WEBLATE_SEPARATOR) == ["删除文件", "", CHINESE, "锁定图层，锁定图层"]
    # Indexes count Weblate's strings with text: the blank one is not translated, so not listed.
    assert response.headers[HEADER] == "flagged 2/3: 0=numbers; 2=loop"
    assert flag_counts(client)[("numbers", "default")] >= 1


def test_a_stream_has_no_header_and_the_policy_off_sends_none(flagging: Served) -> None:
    _, client = flagging
    chat = {"model": "fake", "messages": [{"role": "user", "content": "Say hi"}], "stream": True}
    with client.stream("POST", "/v1/chat/completions", json=chat) as response:
        assert response.status_code == 200 and HEADER not in response.headers
    with served(qa="off") as (engine, quiet):
        engine.script["Tell a long story"] = [("Once upon a time", "length")]
        off = quiet.post("/v1/completions", json={"model": "fake", "prompt": "Tell a long story"})
        assert off.status_code == 200 and HEADER not in off.headers

"""Translation memories through the real stack (`up`: Nginx + two vLLM replicas on a tiny hy-mt1.5
checkpoint, the keyed shared stack): a key's TMX import answers its exact strings in every API with no
engine call, close matches reach the real engine through the terminology prompt, other keys see none."""

from __future__ import annotations

import json
from collections.abc import Iterator

import deepl
import httpx
import pytest
from libretranslatepy import LibreTranslateAPI

from tests.memory.test_tmx import WEBLATE
from tests.support.shared_stack import KEYS, SharedStack

pytestmark = [pytest.mark.engine, pytest.mark.nginx]

KEY = KEYS["memory"].secret
OTHER = KEYS["memory-other"].secret
TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def http(keyed_stack: SharedStack) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(
        base_url=keyed_stack.url, headers=headers, timeout=TIMEOUT_S, trust_env=False
    ) as client:
        made = client.post("/memories", params={"file": "weblate.tmx"}, content=WEBLATE.encode())
        assert made.status_code == 201, made.text
        yield client
        assert client.delete("/memories").status_code == 204


def test_exact_strings_are_answered_from_the_memory_in_every_api(
    http: httpx.Client, keyed_stack: SharedStack
) -> None:
    native = http.post(
        "/translate",
        json={"texts": ["Sampling steps", "Batch count"], "source_lang": "en", "target_lang": "zh"},
    )
    assert native.json()["results"] == ["迭代步数", "总批次数"] and native.json()["memory"] == [
        "exact",
        "exact",
    ]
    assert native.headers["X-Hunyuan-Memory"] == "exact"
    translator = deepl.Translator(KEY, server_url=keyed_stack.url, send_platform_info=False)
    assert translator.translate_text("Batch count", source_lang="EN", target_lang="ZH").text == "总批次数"
    libre = LibreTranslateAPI(keyed_stack.url + "/libretranslate/", api_key=KEY)
    assert libre.translate("Sampling steps", "en", "zh-Hans", timeout=TIMEOUT_S) == "迭代步数"
    immersive = http.post(
        "/immersive/translate", json={"text_list": ["Batch count"], "source_lang": "en", "target_lang": "zh"}
    )
    assert immersive.json()["translations"][0]["text"] == "总批次数"
    assert immersive.headers["X-Hunyuan-Memory"] == "exact"


def test_a_close_match_guides_the_real_engine(http: httpx.Client) -> None:
    answer = http.post(
        "/translate", json={"text": "Sampling steps now", "source_lang": "en", "target_lang": "zh"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["memory"] == "fuzzy" and answer.headers["X-Hunyuan-Memory"] == "fuzzy"
    assert isinstance(answer.json()["result"], str)  # the tiny model's noise, through the terminology prompt


def test_a_stream_of_a_close_match_is_guided_as_its_answer_would_be(http: httpx.Client) -> None:
    body = {"text": "Batch count now", "source_lang": "en", "target_lang": "zh", "stream": True}
    stream = http.post("/translate", json=body)
    assert stream.status_code == 200, stream.text
    assert stream.headers["X-Hunyuan-Memory"] == "fuzzy"
    done = [json.loads(line[len("data: ") :]) for line in stream.text.splitlines() if '"done"' in line]
    assert len(done) == 1 and done[0]["memory"] == "fuzzy", stream.text
    # A text the memory has nothing close to is streamed as before, its miss said too.
    body["text"] = "Completely unrelated words about the weather"
    miss = http.post("/translate", json=body)
    assert miss.headers["X-Hunyuan-Memory"] == "miss" and '"memory": "miss"' in miss.text


def test_another_keys_memory_is_its_own(http: httpx.Client, keyed_stack: SharedStack) -> None:
    other = {"Authorization": f"Bearer {OTHER}"}
    answer = http.post(
        "/translate", json={"text": "Batch count", "source_lang": "en", "target_lang": "zh"}, headers=other
    )
    assert answer.status_code == 200 and answer.json()["result"] != "总批次数"
    assert "memory" not in answer.json()  # no memory anywhere for this key: none is looked up
    assert http.get("/memories", headers=other).json()["imports"] == []


def test_tmserver_answers_through_the_front(http: httpx.Client) -> None:
    assert http.get("/tmserver/languages/").json()["targetLanguages"] == ["zh", "zh_cn", "zh_hans"]
    found = http.get("/tmserver/en/zh_hans/unit/Batch%20count").json()
    assert found == [{"source": "Batch count", "target": "总批次数", "quality": 100}]


def test_close_matches_and_streams_in_every_dialect(http: httpx.Client) -> None:
    # "Batch count now" is a close match of "Batch count" in every API; a stream of a stored string
    # comes from the memory; Weblate's OpenAI prompt is looked up as its string.
    close = {
        "/v2/translate": {"text": ["Batch count now"], "source_lang": "EN", "target_lang": "ZH"},
        "/libretranslate/translate": {"q": "Batch count now", "source": "en", "target": "zh"},
        "/immersive/translate": {"text_list": ["Batch count now"], "source_lang": "en", "target_lang": "zh"},
    }
    for path, body in close.items():
        answer = http.post(path, json=body)
        assert answer.status_code == 200 and answer.headers["X-Hunyuan-Memory"] == "fuzzy", (
            path,
            answer.text,
        )
    stream = http.post(
        "/translate", json={"text": "Batch count", "source_lang": "en", "target_lang": "zh", "stream": True}
    )
    assert stream.headers["X-Hunyuan-Memory"] == "exact" and '"delta": "总批次数"' in stream.text
    found = http.post(
        "/memories/lookup", json={"source_lang": "en", "target_lang": "zh", "texts": ["Batch count", "x"]}
    )
    assert found.json() == {"translations": ["总批次数", None], "memory": True}
    system = (
        "\nYou are a highly skilled translation assistant, adept at translating text\n"
        "from language 'en'\nto language 'zh_Hans'\nwith precision and nuance.\n\n\n"
        "You always reply with translated string only.\n"
    )
    model = http.get("/v1/models").json()["data"][0]["id"]
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Sampling steps"}]
    chat = http.post("/v1/chat/completions", json={"model": model, "messages": messages, "stream": True})
    assert chat.headers["X-Hunyuan-Memory"] == "exact" and "迭代步数" in chat.text

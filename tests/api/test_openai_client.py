"""The official `openai` client, unchanged, against the real stack (`up`: Nginx + a vLLM replica on the tiny
model): models, chat (whole and streamed), completions, Weblate's packed strings, refusals; and our own
/translate streamed through Nginx.

Random weights emit EOS at once, so the stack runs with the test knob that ignores it: each answer is
then exactly max_tokens tokens of noise, and the checks are on shapes and counts, not on the text.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

from hunyuan_serve.replica.apis.openai_schema import WEBLATE_SEPARATOR
from hunyuan_serve.supervise.status import collect_status
from tests.support.shared_stack import SharedStack

pytestmark = [pytest.mark.engine, pytest.mark.nginx]

TOKENS = 6


@dataclass
class Stack:
    url: str
    log: Path
    client: openai.OpenAI
    model: str
    run_dir: Path

    def metric(self, name: str) -> float:
        """A counter or gauge of the (one) replica's /metrics, read where `up` reaches it."""
        status = collect_status(self.run_dir) or {}
        addr = status["replicas"][0]["addr"]
        text = httpx.get(f"http://{addr}/metrics", timeout=10, trust_env=False).text
        values = [line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")]
        return float(values[0]) if values else 0.0


@pytest.fixture(scope="module")
def stack(shared_stack: SharedStack) -> Iterator[Stack]:
    url = shared_stack.url
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
    with client:
        yield Stack(url, shared_stack.log, client, client.models.list().data[0].id, shared_stack.run_dir)


def test_models_lists_the_one_served_model(stack: Stack) -> None:
    models = stack.client.models.list().data
    assert [m.id for m in models] == [stack.model]
    assert stack.client.models.retrieve(stack.model).id == stack.model


def test_chat_answers_with_usage_and_finish_reason(stack: Stack) -> None:
    answer = stack.client.chat.completions.create(
        model=stack.model,
        messages=[
            {"role": "system", "content": "You are a translator."},
            {"role": "user", "content": "Translate into Chinese: Good morning"},
        ],
        max_tokens=TOKENS,
        extra_body={"top_k": 5, "repetition_penalty": 1.05},
    )
    choice = answer.choices[0]
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason == "length"
    assert answer.usage is not None and answer.usage.completion_tokens == TOKENS
    assert answer.usage.prompt_tokens > 0 and answer.model == stack.model


def test_chat_streams_deltas_then_finish_and_usage(stack: Stack) -> None:
    chunks = list(
        stack.client.chat.completions.create(
            model=stack.model,
            messages=[{"role": "user", "content": "Translate into French: a streamed sentence"}],
            max_tokens=TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    with_text = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(with_text) >= 2, "the text should arrive in several chunks, not at once"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == TOKENS


def test_completions_answers_each_prompt(stack: Stack) -> None:
    answer = stack.client.completions.create(model=stack.model, prompt=["Hello", "World"], max_tokens=TOKENS)
    assert [c.index for c in answer.choices] == [0, 1]
    assert all(c.finish_reason == "length" for c in answer.choices)
    assert answer.usage is not None and answer.usage.completion_tokens == 2 * TOKENS


def test_a_cached_completion_reports_the_first_answers_finish_reason_and_usage(stack: Stack) -> None:
    """The second identical request is answered from the cache, cut off as the first one was."""
    hits = 'hunyuan_cache_hits_total{layer="memory"}'
    prompt = "A completion asked twice, cut off at max_tokens"
    first = stack.client.completions.create(model=stack.model, prompt=prompt, max_tokens=TOKENS)
    before = stack.metric(hits)
    again = stack.client.completions.create(model=stack.model, prompt=prompt, max_tokens=TOKENS)
    assert stack.metric(hits) == before + 1  # answered from the cache, not the engine
    assert first.choices[0].finish_reason == again.choices[0].finish_reason == "length"
    assert again.choices[0].text == first.choices[0].text
    assert first.usage is not None and first.usage.completion_tokens == TOKENS
    assert first.usage.prompt_tokens > 0
    assert again.usage == first.usage


def test_a_cached_stream_reports_the_first_answers_finish_reason_and_usage(stack: Stack) -> None:
    def streamed() -> list[openai.types.chat.ChatCompletionChunk]:
        chunks = stack.client.chat.completions.create(
            model=stack.model,
            messages=[{"role": "user", "content": "Translate into German: a stream asked twice"}],
            max_tokens=TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
        return list(chunks)

    hits = 'hunyuan_cache_hits_total{layer="memory"}'
    first = streamed()
    before = stack.metric(hits)
    again = streamed()
    assert stack.metric(hits) == before + 1
    for chunks in (first, again):
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        assert finishes == ["length"]
    assert first[-1].usage is not None and first[-1].usage.completion_tokens == TOKENS
    assert again[-1].usage == first[-1].usage


def test_weblate_packed_strings_come_back_in_the_shape_weblate_parses(stack: Stack) -> None:
    # Copied from Weblate 5.14.3 (PyPI weblate==5.14.3), weblate/machinery/openai.py: PROMPT with persona,
    # style, placeables and glossary empty and SEPARATOR_PROMPT (sent for more than one string), less the
    # blank lines the empty parts leave at its end; the strings joined by SEPARATOR, temperature and both
    # penalties 0, as its _download sends them. Recheck it against that file when Weblate changes it.
    system = (
        "\nYou are a highly skilled translation assistant, adept at translating text\n"
        "from language 'en'\nto language 'de'\nwith precision and nuance.\n\n\n"
        "You always reply with translated string only.\nYou do not include transliteration.\n"
        f"\nYou receive an input as strings separated by {WEBLATE_SEPARATOR} and\n"
        f"your answer separates strings by {WEBLATE_SEPARATOR}.\n"
    )
    strings = ["Save changes", "Open file", "Delete %s?"]
    answer = stack.client.chat.completions.create(
        model=stack.model,
        messages=[
            {"role": "system", "content": system},
            {"role": "user", "content": WEBLATE_SEPARATOR.join(strings)},
        ],
        temperature=0,
        frequency_penalty=0,
        presence_penalty=0,
        max_tokens=TOKENS,
    )
    content = answer.choices[0].message.content
    assert content is not None
    assert len(content.split(WEBLATE_SEPARATOR)) == len(strings)  # Weblate's own parse check
    assert answer.usage is not None and answer.usage.completion_tokens == len(strings) * TOKENS


def test_refusals_are_openai_errors(stack: Stack) -> None:
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError) as bad:
        stack.client.chat.completions.create(model=stack.model, messages=messages, n=2)  # type: ignore[arg-type]
    assert bad.value.code == "unsupported_parameter" and "n=" in bad.value.message
    with pytest.raises(openai.NotFoundError) as missing:
        stack.client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as empty:
        stack.client.chat.completions.create(model=stack.model, messages=[])
    assert empty.value.code == "empty_messages"


def test_translate_streams_through_nginx(stack: Stack) -> None:
    body = {"text": "A sentence to stream", "source_lang": "en", "target_lang": "zh", "stream": True}
    # vLLM hands a slow reader the latest text at once (deltas merge when this process lags on a
    # busy machine): enough tokens that a stream of one chunk means streaming is broken, not slow.
    body["max_tokens"] = 2 * TOKENS  # the stack's --max-tokens
    events = []
    with httpx.stream("POST", stack.url + "/translate", json=body, timeout=120, trust_env=False) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
    deltas = [e["delta"] for e in events if "delta" in e]
    assert len(deltas) >= 2
    done = events[-1]
    assert done["done"] is True and done["result"] == "".join(deltas).strip()


def test_a_stream_the_client_leaves_is_aborted_in_the_engine(stack: Stack) -> None:
    aborts = stack.metric("hunyuan_engine_aborts_total")
    body = {
        "model": stack.model,
        "messages": [{"role": "user", "content": "Translate into German: a long answer nobody waits for"}],
        "max_tokens": 400,  # far more than it takes to read one chunk and leave
        "stream": True,
    }
    with httpx.stream(
        "POST", stack.url + "/v1/chat/completions", json=body, timeout=120, trust_env=False
    ) as r:
        for line in r.iter_lines():
            if '"content": "' in line and '"role"' not in line:
                break  # the first text: now hang up, through Nginx, mid-generation
    deadline = time.monotonic() + 60
    while (
        stack.metric("hunyuan_engine_aborts_total") <= aborts or stack.metric("hunyuan_engine_unfinished") > 0
    ):
        assert time.monotonic() < deadline, "the engine request was not aborted after the client left"
        time.sleep(0.2)

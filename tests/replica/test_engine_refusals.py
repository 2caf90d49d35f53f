"""An engine-side error the request caused is that API's 400; only the engine's own failure is a 503."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator

import httpx
import pytest
from jinja2 import TemplateError

from hunyuan_serve.families.base import Prompt
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine.interface import Delta, Generation, Sampling
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready

ERRORS: dict[str, Exception] = {
    "value": ValueError("the prompt holds a token this tokenizer refuses"),
    "template": TemplateError("Conversation roles must alternate user/assistant/user/assistant/..."),
    "runtime": RuntimeError("engine core died"),
}


class RaisingEngine(FakeEngine):
    """Raises, when the prompt is counted, the error a prompt's text names (else answers as FakeEngine)."""

    def count_prompt_tokens(self, prompt: Prompt) -> int:
        text = prompt.messages[-1]["content"] if prompt.is_chat else prompt.text
        if text in ERRORS:
            raise ERRORS[text]
        return super().count_prompt_tokens(prompt)

    async def stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> AsyncGenerator[Delta, None]:
        yield Delta("x")
        if prompt.text.startswith("late "):  # found by the engine once the stream is under way
            raise ERRORS[prompt.text.removeprefix("late ")]
        yield Delta("", Generation("x", 1, 1, "stop"))


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    app = create_app(RaisingEngine(), make_config(max_tokens=8), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=10) as http:
        wait_ready(http)
        yield http


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", lambda text: {"messages": [{"role": "user", "content": text}]}),
        ("/v1/completions", lambda text: {"prompt": text}),
        ("/v1/completions", lambda text: {"prompt": text, "stream": True}),
    ],
    ids=["chat", "completion", "streamed"],
)
def test_request_faults_are_400_and_engine_failures_503(
    client: httpx.Client, path: str, body: object
) -> None:
    assert callable(body)
    for text in ("value", "template"):
        refused = client.post(path, json=body(text))
        assert refused.status_code == 400, refused.text
        assert "retry-after" not in refused.headers
        error = refused.json()["error"]
        assert error["code"] == "invalid_request" and error["type"] == "invalid_request_error"
        assert str(ERRORS[text]) in error["message"]
    failed = client.post(path, json=body("runtime"))
    assert failed.status_code == 503 and failed.headers["retry-after"], failed.text
    assert failed.json()["error"]["code"] == "engine_error"


def test_a_fault_found_mid_stream_ends_it_with_a_400_event(client: httpx.Client) -> None:
    answer = client.post("/v1/completions", json={"prompt": "late value", "stream": True})
    assert answer.status_code == 200  # sent before the engine's refusal
    assert '"code": "invalid_request"' in answer.text and answer.text.rstrip().endswith("data: [DONE]")
    failed = client.post("/v1/completions", json={"prompt": "late runtime", "stream": True})
    assert '"code": "engine_error"' in failed.text

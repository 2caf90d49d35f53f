"""A checkpoint without a chat template: chat requests are the caller's 400, never a 503 to retry.

A real replica process (engine.stand_in: the checkpoint's real tokenizer, no model) on a tiny checkpoint
stripped of its template, called by the official `openai` client with its default retries.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import openai
import pytest

from hunyuan_serve.replica.errors import CHAT_TEMPLATE_MISSING
from tests.support.stacks import cli, free_port, http_ok, started


@dataclass
class Served:
    url: str
    model: str
    sent: list[str] = field(default_factory=list)  # each HTTP request the openai client sent, retries too

    def client(self) -> openai.OpenAI:
        """The client as an application makes it: default max_retries (2), which retries 5xx and 429."""
        hook = {"request": [lambda request: self.sent.append(request.url.path)]}
        http = openai.DefaultHttpxClient(event_hooks=hook, trust_env=False, timeout=60)
        return openai.OpenAI(base_url=self.url + "/v1", api_key="unused", http_client=http)

    def answered(self, status: int) -> float:
        """The replica's own count of the requests it answered with `status`."""
        text = httpx.get(self.url + "/metrics", trust_env=False, timeout=10).text
        line = f'hunyuan_requests_total{{status="{status}"}} '
        values = [row.removeprefix(line) for row in text.splitlines() if row.startswith(line)]
        return float(values[0]) if values else 0.0


def strip_chat_template(source: Path, out: Path) -> Path:
    """A copy of the checkpoint without its chat template (neither the .jinja file nor the config key)."""
    shutil.copytree(source, out)
    (out / "chat_template.jinja").unlink(missing_ok=True)
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config.pop("chat_template", None)
    config_path.write_text(json.dumps(config), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def served(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    work = tmp_path_factory.mktemp("no-chat-template")
    model = strip_chat_template(tiny_model_dir, work / "model")
    port = free_port()
    argv = cli("replica", "--model", str(model), "--stand-in", "true", "--port", str(port))
    # The few-shot family (a base model's, as the demo's) builds plain prompts: /translate needs no template.
    argv += ["--max-model-len", "512", "--served-model-name", "no-template", "--prompt-family", "few-shot"]
    url = f"http://127.0.0.1:{port}"
    with started(argv, log=work / "replica.log", ready=http_ok(f"{url}/health"), timeout_s=120):
        yield Served(url, "no-template")


def _refused(served: Served, stream: bool) -> openai.BadRequestError:
    served.sent.clear()
    before = served.answered(400)
    messages: list[openai.types.chat.ChatCompletionMessageParam] = [
        {"role": "system", "content": "Translate into Chinese."},
        {"role": "user", "content": "Open the file"},
    ]
    with served.client() as client, pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=served.model, messages=messages, stream=stream)
    assert served.sent == ["/v1/chat/completions"]  # one request: the client did not retry a 400
    assert served.answered(400) == before + 1
    return caught.value


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_chat_without_a_template_is_a_400_in_openai_shape_not_retried(served: Served, stream: bool) -> None:
    err = _refused(served, stream)
    assert err.status_code == 400
    assert "retry-after" not in err.response.headers
    body = err.response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["param"] is None
    assert body["error"]["code"] == CHAT_TEMPLATE_MISSING
    message = body["error"]["message"]
    assert "chat template" in message and "/v1/completions" in message and "/translate" in message
    assert served.answered(503) == 0


def test_the_routes_the_refusal_names_answer(served: Served) -> None:
    with served.client() as client:
        completion = client.completions.create(model=served.model, prompt="Open the file", max_tokens=4)
    assert completion.choices[0].text and completion.usage is not None
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    body = {"text": "Open the file", "source_lang": "en", "target_lang": "zh"}
    translated = httpx.post(served.url + "/translate", json=body, trust_env=False, timeout=60)
    assert translated.status_code == 200 and translated.json()["result"], translated.text

"""Tolgee's and SubtitleEdit's own requests (tests/support/tool_chats.py, each from its source file) over
real HTTP through Nginx to the keyed stack's two replicas (a tiny hy-mt1.5 checkpoint): each answered in
the form the tool reads back, and Tolgee's LOW-priority provider's work counted as bulk."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from tests.support import tool_chats
from tests.support.shared_stack import KEYS, SharedStack

pytestmark = [pytest.mark.engine, pytest.mark.nginx]

CHAT = "/v1/chat/completions"
TIMEOUT_S = 120.0  # a batch of 20 lines on a loaded 2-core machine; Tolgee's own first attempt waits 60 s
LATENCY_COUNT = re.compile(r'^hunyuan_class_latency_seconds_count\{class="(\w+)"\} (\S+)$', re.MULTILINE)


def _answered(stack: SharedStack) -> dict[str, float]:
    """Requests each class answered, over the stack's replicas (read straight from each, as the
    supervisor reads them)."""
    counts: dict[str, float] = {}
    for index in range(stack.replicas):
        text = httpx.get(f"http://127.0.0.1:{stack.base_port + index}/metrics", timeout=10).text
        for cls, value in LATENCY_COUNT.findall(text):
            counts[cls] = counts.get(cls, 0.0) + float(value)
    return counts


def _content(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    content: str = response.json()["choices"][0]["message"]["content"]
    return content


@pytest.mark.parametrize(("provider", "cls"), [("tolgee-high", "interactive"), ("tolgee-low", "bulk")])
def test_tolgee_gets_its_json_and_its_low_priority_provider_runs_as_bulk(
    keyed_stack: SharedStack, provider: str, cls: str
) -> None:
    key = KEYS[provider].secret
    body = tool_chats.tolgee(
        f"Open the {provider} settings", "English", "German", terms=(("settings", "Einstellungen"),)
    )
    before = _answered(keyed_stack)
    response = httpx.post(
        keyed_stack.url + CHAT, json=body, headers=tool_chats.tolgee_headers(key), timeout=TIMEOUT_S
    )
    # What PromptResultParser.kt reads: a JSON object whose "output" is a string.
    answer = json.loads(_content(response))
    assert isinstance(answer["output"], str) and answer["output"], answer
    assert isinstance(answer["contextDescription"], str)
    after = _answered(keyed_stack)
    assert after.get(cls, 0.0) - before.get(cls, 0.0) == 1.0, (before, after)


def test_subtitleedits_batch_of_20_lines_is_filled_keyed_by_line_number(keyed_stack: SharedStack) -> None:
    lines = [
        f"Line {n}: <i>we leave at dawn</i>" if n % 5 == 0 else f"Line {n}: we leave at dawn."
        for n in range(1, 21)
    ]
    body = tool_chats.subtitle_batch(lines, "English", "German", history=(("Hello.", "Hallo."),))
    # Its client sends no key: the URL typed into it carries one (a URL with a query is kept as typed).
    url = f"{keyed_stack.url}{CHAT}?token={KEYS['subtitleedit'].secret}"
    answer = json.loads(tool_chats.streamed_text(httpx.post(url, json=body, timeout=TIMEOUT_S)))
    # AdvancedTranslatorBase.IsComplete: every line number, each non-empty.
    assert list(answer) == [str(n) for n in range(1, 21)]
    assert all(isinstance(text, str) and text for text in answer.values())
    # Its tags come back as they went (the family's prompt sees the text between them).
    assert all("<i>" in answer[str(n)] and "</i>" in answer[str(n)] for n in range(5, 21, 5))


def test_subtitleedits_one_line_engine_gets_a_translation(keyed_stack: SharedStack) -> None:
    served = httpx.get(f"{keyed_stack.url}/v1/models", headers=_bearer(), timeout=10).json()["data"][0]["id"]
    body: dict[str, Any] = tool_chats.subtitle_line("Where is he?\nHe left.", "English", "German", served)
    content = _content(httpx.post(keyed_stack.url + CHAT, json=body, headers=_bearer(), timeout=TIMEOUT_S))
    assert content.strip() and "keep punctuation" not in content


def _bearer() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS['subtitleedit'].secret}"}

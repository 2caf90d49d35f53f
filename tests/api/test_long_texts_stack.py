"""A text over the token budget through the real stack in every dialect: cut into segments by the one
translation core, translated, and joined paragraph for paragraph.

The shared stack's model has a 512-token window and the family's segment target of 256 tokens: the
text below, about 2,000 tokens, was a 413 whole. Its answers are the tiny model's noise, so a paragraph
may gain a blank line, never lose one: each paragraph is a segment (or more) of its own. A document
job (the keyed stack's, through DeepL's document API) sends each paragraph as a line of its own, which
the core cuts as it cuts any text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import deepl
import httpx
import pytest

from hunyuan_serve.qa import completeness
from hunyuan_serve.replica.apis.openai_schema import WEBLATE_SEPARATOR
from tests.support.shared_stack import KEYS, SharedStack

pytestmark = [pytest.mark.engine, pytest.mark.nginx]

SENTENCES = [
    "The printer on the second floor is out of paper again",
    "Please ask the front desk for a new box before the meeting starts",
    "Every report must be saved to the shared folder by Friday evening",
    "The new version of the app opens faster and uses less memory",
]
# Six paragraphs of about 1,200 tokens each in the tiny model's tokenizer (digits are a token each).
PARAGRAPHS = [" ".join(f"{s}, part {p}.{n}." for n in range(6) for s in SENTENCES) for p in range(6)]
LONG = "\n\n".join(PARAGRAPHS)
WEBLATE_SYSTEM = (
    "\nYou are a highly skilled translation assistant, adept at translating text\n"
    "from language 'en'\nto language 'de'\nwith precision and nuance.\n\n\n"
    "You always reply with translated string only.\nYou do not include transliteration.\n"
    f"\nYou receive an input as strings separated by {WEBLATE_SEPARATOR} and\n"
    f"your answer separates strings by {WEBLATE_SEPARATOR}.\n"
)
# Weblate 2026's structured task (weblate/machinery/llm.py): the system prompt's opening, then the task.
TASK_SYSTEM = "\nYou are a professional translation engine specialized in structured localization tasks.\n"
TASK = {
    "source_language": "en",
    "target_language": "de",
    "glossary": [],
    "strings": [{"source": LONG, "parts": [{"type": "text", "text": LONG}]}],
}


def _chat(messages: list[dict[str, str]]) -> Callable[[httpx.Client], dict[str, Any]]:
    return lambda http: {"model": http.get("/v1/models").json()["data"][0]["id"], "messages": messages}


def _events(response: httpx.Response) -> dict[str, Any]:
    """A native stream's last event: the whole answer."""
    lines = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    return dict(json.loads(lines[-1]))


# dialect: (path, the body (or how to build it from the stack), the long text's answer in the response)
Call = tuple[str, Any, Callable[[httpx.Response], str]]
DIALECTS: dict[str, Call] = {
    "native": (
        "/translate",
        {"text": LONG, "source_lang": "en", "target_lang": "de"},
        lambda r: str(r.json()["result"]),
    ),
    "native-stream": (
        "/translate",
        {"text": LONG, "source_lang": "en", "target_lang": "de", "stream": True},
        lambda r: str(_events(r)["result"]),
    ),
    "openai-weblate": (
        "/v1/chat/completions",
        _chat(
            [
                {"role": "system", "content": WEBLATE_SYSTEM},
                {"role": "user", "content": WEBLATE_SEPARATOR.join([LONG, "Open file"])},
            ]
        ),
        lambda r: str(r.json()["choices"][0]["message"]["content"]).split(WEBLATE_SEPARATOR)[0],
    ),
    "openai-task": (
        "/v1/chat/completions",
        _chat([{"role": "system", "content": TASK_SYSTEM}, {"role": "user", "content": json.dumps(TASK)}]),
        lambda r: str(json.loads(r.json()["choices"][0]["message"]["content"])[0]),
    ),
    "libretranslate": (
        "/libretranslate/translate",
        {"q": LONG, "source": "en", "target": "de"},
        lambda r: str(r.json()["translatedText"]),
    ),
    "deepl": (
        "/v2/translate",
        {"text": [LONG], "source_lang": "EN", "target_lang": "DE"},
        lambda r: str(r.json()["translations"][0]["text"]),
    ),
    "immersive": (
        "/immersive/translate",
        {"source_lang": "en", "target_lang": "de", "text_list": [LONG]},
        lambda r: str(r.json()["translations"][0]["text"]),
    ),
}


def _paragraph_for_paragraph(text: str, dialect: str) -> None:
    assert completeness.paragraphs(text) >= len(PARAGRAPHS), (dialect, text[:300])
    assert text.count("\n\n") >= len(PARAGRAPHS) - 1, dialect


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_a_text_over_the_budget_is_answered_paragraph_for_paragraph(
    dialect: str, shared_stack: SharedStack
) -> None:
    assert len(LONG) > 4 * 512  # more than the model's window, at any tokenizer's four characters a token
    path, body, answer_of = DIALECTS[dialect]
    with httpx.Client(base_url=shared_stack.url, timeout=120, trust_env=False) as http:
        response = http.post(path, json=body(http) if callable(body) else body)
    assert response.status_code == 200, (dialect, response.text[:500])
    _paragraph_for_paragraph(answer_of(response), dialect)


def test_a_document_job_cuts_its_long_lines_as_any_text(keyed_stack: SharedStack, tmp_path: Path) -> None:
    source, out = tmp_path / "notes.txt", tmp_path / "notes.de.txt"
    source.write_text(LONG + "\n", encoding="utf-8")
    translator = deepl.Translator(
        KEYS["long-texts"].secret, server_url=keyed_stack.url, send_platform_info=False
    )
    status = translator.translate_document_from_filepath(source, out, source_lang="EN", target_lang="DE")
    assert status.done
    translated = out.read_text(encoding="utf-8").split("\n")
    # Line for line: each paragraph's line answered (not empty), each blank line kept blank.
    assert len(translated) == len(LONG.split("\n")) + 1, translated
    assert [bool(line.strip()) for line in translated[:-1]] == [bool(line) for line in LONG.split("\n")]

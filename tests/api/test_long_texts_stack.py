"""A text over the token budget through the real stack in every dialect: cut into segments by the one
translation core, translated, and joined paragraph for paragraph.

The shared stack's model has a 512-token window and the family's segment target of 256 tokens: the
text below, about 2,000 tokens, was a 413 whole. Its answers are the tiny model's noise, so a paragraph
may gain a blank line, never lose one: each paragraph is a segment (or more) of its own.
"""

from __future__ import annotations

import time

import httpx
import pytest

from hunyuan_serve.qa import completeness
from hunyuan_serve.replica.apis.openai_schema import WEBLATE_SEPARATOR
from tests.support.shared_stack import SharedStack

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


def _answers(http: httpx.Client) -> dict[str, str]:
    """The long text's answer in each dialect, each a 200."""
    calls = {
        "native": ("/translate", {"text": LONG, "source_lang": "en", "target_lang": "de"}),
        "openai": (
            "/v1/chat/completions",
            {
                "model": http.get("/v1/models").json()["data"][0]["id"],
                "messages": [
                    {"role": "system", "content": WEBLATE_SYSTEM},
                    {"role": "user", "content": WEBLATE_SEPARATOR.join([LONG, "Open file"])},
                ],
            },
        ),
        "libretranslate": ("/libretranslate/translate", {"q": LONG, "source": "en", "target": "de"}),
        "deepl": ("/v2/translate", {"text": [LONG], "source_lang": "EN", "target_lang": "DE"}),
        "immersive": (
            "/immersive/translate",
            {"source_lang": "en", "target_lang": "de", "text_list": [LONG]},
        ),
    }
    got = {}
    for name, (path, body) in calls.items():
        answer = http.post(path, json=body)
        assert answer.status_code == 200, (name, answer.text)
        got[name] = _text(name, answer.json())
    return got


def _text(dialect: str, body: dict) -> str:
    if dialect == "native":
        return str(body["result"])
    if dialect == "openai":
        return str(body["choices"][0]["message"]["content"]).split(WEBLATE_SEPARATOR)[0]
    if dialect == "libretranslate":
        return str(body["translatedText"])
    return str(body["translations"][0]["text"])


def test_a_text_over_the_budget_is_answered_in_every_dialect_paragraph_for_paragraph(
    shared_stack: SharedStack,
) -> None:
    assert len(LONG) > 4 * 512  # more than the model's window, at any tokenizer's four characters a token
    with httpx.Client(base_url=shared_stack.url, timeout=120, trust_env=False) as http:
        started = time.monotonic()
        answers = _answers(http)
        took = time.monotonic() - started
    for dialect, text in answers.items():
        assert completeness.paragraphs(text) >= len(PARAGRAPHS), (dialect, text[:300])
        assert text.count("\n\n") >= len(PARAGRAPHS) - 1, dialect
    print(f"five dialects, {len(LONG)} characters each: {took:.1f} s")

"""Which family has which feature, and the 400 messages for the rest (pure logic, no engine)."""

from __future__ import annotations

from typing import Any

import pytest

from hunyuan_serve.families import FAMILIES
from hunyuan_serve.families.base import FeatureUnsupported, GlossaryInvalid, PromptInputError
from hunyuan_serve.families.build import UnknownFamily, build_prompt, canonical_family, families_with
from hunyuan_serve.languages import find_language

EN, ZH = find_language("en"), find_language("zh")


def test_feature_table() -> None:
    # HY-MT1.5's README: terminology, contextual, formatted. Hy-MT2's README: terminology, style,
    # background (no formatted-translation prompt). Hunyuan-MT-7B's README: none.
    assert families_with("glossary") == ("hy-mt1.5", "hy-mt2")
    assert families_with("context") == ("hy-mt1.5", "hy-mt2")
    assert families_with("style") == ("hy-mt2",)
    assert families_with("preserve_format") == ("hy-mt1.5",)


@pytest.mark.parametrize(
    ("family", "kwargs", "message"),
    [
        ("hunyuan-mt", {"style": "formal"}, "prompt family hunyuan-mt has no official prompt for style; "
         "families that have one: hy-mt2"),
        ("hy-mt1.5", {"style": "formal"}, "prompt family hy-mt1.5 has no official prompt for style; "
         "families that have one: hy-mt2"),
        ("hy-mt2", {"preserve_format": True}, "prompt family hy-mt2 has no official prompt for "
         "preserve_format; families that have one: hy-mt1.5"),
        ("few-shot", {"glossary": {"Hi": "Salut"}}, "prompt family few-shot has no official prompt for "
         "glossary; families that have one: hy-mt1.5, hy-mt2"),
        ("hunyuan", {"context": "x"}, "prompt family hunyuan-mt has no official prompt for context; "
         "families that have one: hy-mt1.5, hy-mt2"),
        ("hy-mt2", {"glossary": {"Hi": "你好"}, "style": "formal"}, "prompt family hy-mt2 has no official "
         "prompt for glossary together with style; no family has one (each official prompt takes one of "
         "them at a time)"),
    ],
)  # fmt: skip
def test_missing_feature_names_the_families_that_have_it(
    family: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(FeatureUnsupported) as info:
        build_prompt(family, EN, ZH, "Hi", **kwargs)
    assert str(info.value) == message


def test_a_glossary_without_a_term_in_the_text_is_no_feature() -> None:
    # Only terms that occur are sent, so a family without terminology still translates this text.
    prompt = build_prompt("hunyuan-mt", EN, ZH, "Hello", glossary={"GPU": "显卡"})
    assert prompt.messages[0]["content"] == "把下面的文本翻译成中文，不要额外解释。\n\nHello"


def test_blank_context_and_style_are_not_sent() -> None:
    assert build_prompt("hunyuan-mt", EN, ZH, "Hi", context="  ", style="") == build_prompt(
        "hunyuan-mt", EN, ZH, "Hi"
    )


def test_oversized_context_is_a_400() -> None:
    with pytest.raises(PromptInputError, match="context is longer than 20000 characters"):
        build_prompt("hy-mt2", EN, ZH, "Hi", context="x" * 20_001)


def test_glossary_errors_are_prompt_input_errors() -> None:
    with pytest.raises(GlossaryInvalid):
        build_prompt("hy-mt2", EN, ZH, "Hi", glossary="Hi=Salut")
    assert issubclass(GlossaryInvalid, PromptInputError) and issubclass(FeatureUnsupported, PromptInputError)


@pytest.mark.parametrize(
    ("name", "expected"), [("HY-MT2", "hy-mt2"), (" hunyuan ", "hunyuan-mt"), ("few_shot", "few-shot")]
)
def test_canonical_family_accepts_old_names(name: str, expected: str) -> None:
    assert canonical_family(name) == expected


def test_unknown_family_lists_the_known() -> None:
    with pytest.raises(UnknownFamily, match="unknown prompt family 'qwen'; known: " + ", ".join(FAMILIES)):
        canonical_family("qwen")

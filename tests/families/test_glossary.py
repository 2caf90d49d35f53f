"""The request glossary: its two shapes, its limits, and sending only the terms found in the text."""

from __future__ import annotations

from typing import Any

import pytest

from hunyuan_serve.families.base import GlossaryInvalid
from hunyuan_serve.families.glossary import (
    MAX_GLOSSARY_TERMS,
    MAX_TERM_CHARS,
    parse_request_glossary,
    terms_in_text,
)


def test_object_and_list_shapes_are_the_same_glossary() -> None:
    as_object = parse_request_glossary({"GPU": "显卡", " LoRA ": "LoRA"})
    as_list = parse_request_glossary(
        [{"source": "GPU", "target": "显卡"}, {"source": "LoRA", "target": "LoRA"}]
    )
    assert as_object == as_list == (("GPU", "显卡"), ("LoRA", "LoRA"))
    assert parse_request_glossary(None) == ()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("GPU=显卡", "glossary must be an object"),
        (42, "glossary must be an object"),
        ([{"source": "GPU"}], r"glossary\[0\]: each entry must be"),
        ([{"source": "GPU", "target": "显卡", "note": "x"}], r"glossary\[0\]: each entry must be"),
        (["GPU"], r"glossary\[0\]: each entry must be"),
        ({"GPU": 3}, r"glossary\['GPU'\]: source and target must be strings"),
        ({"GPU": " "}, r"glossary\['GPU'\]: source and target must not be empty"),
        ([{"source": "GPU", "target": "显\x00卡"}], r"glossary\[0\]: a term must not hold a NUL character"),
        (
            [{"source": "x" * (MAX_TERM_CHARS + 1), "target": "y"}],
            rf"longer than {MAX_TERM_CHARS} characters",
        ),
        ({f"t{i}": "x" for i in range(MAX_GLOSSARY_TERMS + 1)}, rf"at most {MAX_GLOSSARY_TERMS} are allowed"),
    ],
)
def test_malformed_or_oversized_glossary_names_the_problem(value: Any, message: str) -> None:
    with pytest.raises(GlossaryInvalid, match=message):
        parse_request_glossary(value)


def test_limits_can_come_from_the_config() -> None:
    with pytest.raises(GlossaryInvalid, match="at most 2 are allowed"):
        parse_request_glossary({"a": "1", "b": "2", "c": "3"}, max_terms=2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Load the checkpoint.", ["checkpoint"]),
        ("Concatenate the CATS.", []),  # whole words: neither "concatenate" nor "cats" is "cat"
        ("A CAT sleeps.", ["cat"]),  # any case
        ("one cat, two dogs", ["cat"]),
        ("小猫很可爱", ["猫"]),  # CJK has no word boundaries
        ("서울에 갑니다", ["서울"]),  # nor Korean with its attached particle
        ("C++ and C#", ["C++"]),
        ("nothing here", []),
    ],
)
def test_only_terms_in_the_text_are_sent(text: str, expected: list[str]) -> None:
    terms = parse_request_glossary(
        {"checkpoint": "检查点", "cat": "猫", "猫": "cat", "서울": "Seoul", "C++": "C++"}
    )
    found = [source for source, _ in terms_in_text(terms, text)]
    assert found == expected

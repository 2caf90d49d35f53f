"""Long texts cut at paragraph, line, sentence, space boundaries (else a safe hard cut) and joined back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hunyuan_serve.text.placeholders import find_placeholders
from hunyuan_serve.text.split import Split, coarsest_cuts, split


def words(text: str) -> int:
    return len(text.split())


def rebuilt(cut: Split) -> str:
    return "".join(gap + piece for gap, piece in zip(cut.gaps, cut.pieces, strict=False)) + cut.gaps[-1]


CODE = "```python\nx = 1\n\ny = 2\n```"
# (text, target, measure, the pieces)
TABLE: list[tuple[str, int, object, list[str]]] = [
    ("Short enough.", 20, len, ["Short enough."]),
    ("  padded  \n", 6, len, ["padded"]),
    (
        "First paragraph here.\n\nSecond one, a bit longer.\n\n\nThird.",
        5,
        words,
        ["First paragraph here.", "Second one, a bit longer.", "Third."],
    ),
    # Paragraphs are never one piece, even where they would fit; lines and sentences are.
    ("One.\n\nTwo.\n\nThree four five six.", 4, words, ["One.", "Two.", "Three four five six."]),
    ("One two\nthree.\nFour five six.", 4, words, ["One two\nthree.", "Four five six."]),
    ("One. Two. Three four five.", 3, words, ["One. Two.", "Three four five."]),
    (
        "Intro:\n- one item\n- two item\n  - nested item",
        3,
        words,
        ["Intro:", "- one item", "- two item", "- nested item"],
    ),
    (
        "Sentence one is here. Sentence two is here. Three!",
        4,
        words,
        ["Sentence one is here.", "Sentence two is here.", "Three!"],
    ),
    ("See e.g. the manual. Then stop.", 4, words, ["See e.g. the manual.", "Then stop."]),
    # A code block is never cut, not even at its blank line.
    (
        f"Before the code block.\n\n{CODE}\n\nAfter it.",
        4,
        words,
        ["Before the code block.", CODE, "After it."],
    ),
    # Placeholders and tags are never cut; an element is cut only where nothing else can be.
    (
        "Open {file_name} now. Save %(count)d files at https://example.com/a.b?c=d. Done.",
        5,
        words,
        ["Open {file_name} now.", "Save %(count)d files at https://example.com/a.b?c=d.", "Done."],
    ),
    (
        "<b>Bold one. Bold two.</b> Plain three. Plain four.",
        4,
        words,
        ["<b>Bold one. Bold two.</b>", "Plain three.", "Plain four."],
    ),
    ("Use `a. b` here. And more.", 4, words, ["Use `a. b` here.", "And more."]),
    ("第一句话。第二句话！第三句话？", 5, len, ["第一句话。", "第二句话！", "第三句话？"]),
    ("最初の文です。次の文です。", 7, len, ["最初の文です。", "次の文です。"]),
    ("「引用です。」次です。", 7, len, ["「引用です。」", "次です。"]),
    ("ประโยคแรกของเรา ประโยคที่สองของเรา", 18, len, ["ประโยคแรกของเรา", "ประโยคที่สองของเรา"]),
    ("यह पहला वाक्य है। यह दूसरा वाक्य है।", 20, len, ["यह पहला वाक्य है।", "यह दूसरा वाक्य है।"]),
    ("one\r\ntwo\r\nthree", 5, len, ["one", "two", "three"]),
]


@pytest.mark.parametrize(("text", "target", "measure", "pieces"), TABLE)
def test_a_text_is_cut_at_its_coarsest_boundaries(
    text: str, target: int, measure: object, pieces: list[str]
) -> None:
    cut = split(text, target, measure)  # type: ignore[arg-type]
    assert list(cut.pieces) == pieces
    assert rebuilt(cut) == text


def test_the_answers_are_joined_with_the_sources_own_gaps() -> None:
    cut = split("Title\n\n  - one item.\n  - two item.", 3, words)
    assert cut.join(["Titel", " - eins.\n", "- zwei."]) == "Titel\n\n  - eins.\n  - zwei."


def test_an_empty_gap_becomes_a_space_in_a_spaced_target_only() -> None:
    cut = split("第一句话。第二句话。", 5, len)
    assert cut.join(["One.", "Two."], spaced=True) == "One. Two."
    assert cut.join(["一。", "二。"]) == "一。二。"


LONG_LINES = [
    "a" * 40_000,
    "word " * 8_000,
    "漢" * 40_000,
    "x" * 19_990 + " {placeholder_name} " + "y" * 19_990,
    ("e\u0301" * 20_000),  # every e carries a combining accent: never cut between them
    "https://example.com/" + "p" * 39_980,  # a URL is never cut: it stays whole, over the target
]


@pytest.mark.parametrize("line", LONG_LINES, ids=lambda line: repr(line[:12]))
def test_a_40000_character_line_is_cut_safely(line: str) -> None:
    cut = split(line, 16, len)
    assert rebuilt(cut) == line
    protected = [(each.start, each.end) for each in find_placeholders(line)]
    at = len(cut.gaps[0])
    for piece, gap in zip(cut.pieces, cut.gaps[1:], strict=True):
        inside = any(a < at < b for a, b in protected)
        assert not inside and not piece[0].startswith("\u0301")
        assert len(piece) <= 16 or any(a <= at and at + len(piece) <= b for a, b in protected)
        at += len(piece) + len(gap)
    assert len(cut.pieces) >= (1 if line.startswith("https") else 2_000)


@pytest.mark.parametrize(
    ("text", "cuts"),
    [
        ("One.\n\nTwo.\nThree.", [(4, 6)]),
        ("a\nb", [(1, 2)]),
        ("First one. Second one.", [(10, 11)]),
        ("Just one sentence", []),
        (f"{CODE}", []),
    ],
)
def test_the_coarsest_cuts_are_those_of_one_level(text: str, cuts: list[tuple[int, int]]) -> None:
    assert coarsest_cuts(text) == cuts


PIECES = st.sampled_from(
    ["Word", "word", ".", "。", " ", "\n", "\n\n", "{x}", "<b>", "</b>", "`c. d`", "ไทย", "\u0301"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=60), st.integers(min_value=1, max_value=12))
def test_any_text_is_rebuilt_exactly_and_placeholders_stay_whole(parts: list[str], target: int) -> None:
    text = "".join(parts)
    cut = split(text, target, len)
    assert rebuilt(cut) == text
    kept = {each.text for each in find_placeholders(text)}
    assert kept <= {each.text for piece in cut.pieces for each in find_placeholders(piece)}

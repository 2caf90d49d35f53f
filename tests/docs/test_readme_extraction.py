"""How the README's curl examples are read for tests/docs/test_readme_examples.py: every one is found,
split as the shell splits it, its documented answer parsed; the reviewed tables name real examples."""

from __future__ import annotations

import re

import pytest

from tests.docs.readme_examples import FENCE, FILLED, README, SPECIAL, blocks, missing, shape

TEXT = README.read_text(encoding="utf-8")
EXAMPLES = [example for block in blocks(TEXT) for example in block.examples]


def test_every_curl_line_of_a_fenced_block_is_an_example() -> None:
    starts = [
        TEXT.count("\n", 0, fence.start(1)) + 1 + n
        for fence in FENCE.finditer(TEXT)
        for n, line in enumerate(fence.group(1).splitlines())
        if line.startswith("curl ")
    ]
    assert starts and [example.line for example in EXAMPLES] == starts
    assert all(TEXT.splitlines()[line - 1].startswith("curl ") for line in starts)


def test_a_command_runs_on_until_its_quote_closes_or_its_backslash_ends() -> None:
    text = (
        '```sh\ncurl -s localhost:8080/a -d \'{\n  "x": 1}\'\n# {"y": ..., "z": [{"w": 1}, ...]}\n'
        "curl -s 'localhost:8080/b?k=K' \\\n     -o out  # a comment\n```\n"
    )
    (block,) = blocks(text)
    first, second = block.examples
    assert first.argv("127.0.0.1:9") == ["curl", "-s", "127.0.0.1:9/a", "-d", '{\n  "x": 1}']
    assert shape(first.documented or "") == {"y": None, "z": [{"w": 1}]}
    assert second.argv("h:1") == ["curl", "-s", "h:1/b?k=K", "-o", "out"] and second.documented is None


def test_every_documented_answer_parses() -> None:
    documented = [example for example in EXAMPLES if example.documented]
    assert len(documented) >= 6
    for example in documented:
        assert isinstance(shape(example.documented or ""), dict), example.line


@pytest.mark.parametrize("table", [SPECIAL, FILLED], ids=["special", "filled"])
def test_each_reviewed_entry_names_an_example_of_the_readme(table: dict[str, object]) -> None:
    for piece in table:
        assert any(piece in example.command for example in EXAMPLES), f"no README example has {piece!r}"


def test_missing_names_each_documented_field_the_answer_lacks() -> None:
    expected = {"a": None, "b": {"c": None}, "d": [{"e": None}]}
    assert missing(expected, {"a": 1, "b": {"c": 2}, "d": [{"e": 3}, {"e": 4}], "extra": 5}) == []
    assert missing(expected, {"b": {}, "d": [{"e": 1}, {}]}) == [".a", ".b.c", ".d[1].e"]
    assert missing(expected, []) == ["the answer is not an object: []"]
    assert re.fullmatch(r"\.d is not a non-empty list: .*", missing({"d": [{}]}, {"d": []})[0])

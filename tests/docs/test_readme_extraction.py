"""How the curl examples of the README and docs/ are read for test_readme_examples.py: every one is found,
split as the shell splits it, its documented answer parsed; the reviewed tables name real examples."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.readme_examples import (
    FENCE,
    FILLED,
    NEEDS_MORE,
    PAGES,
    PUBLIC,
    REPO,
    SPECIAL,
    blocks,
    missing,
    page_blocks,
    page_fenced,
    shape,
)

BLOCKS = page_blocks()
EXAMPLES = [example for block in BLOCKS for example in block.examples]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_every_curl_line_of_a_fenced_block_is_an_example(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    starts = [
        text.count("\n", 0, fence.start(1)) + 1 + n
        for fence in FENCE.finditer(text)
        for n, line in enumerate(fence.group(1).splitlines())
        if line.startswith("curl ")
    ]
    found = [example.line for block in blocks(text) for example in block.examples]
    assert found == starts
    assert all(text.splitlines()[line - 1].startswith("curl ") for line in starts)


def test_the_readme_and_the_api_page_have_examples_that_run() -> None:
    runnable = {block.page for block in BLOCKS if not block.not_run}
    assert {"README.md", "docs/apis.md"} <= runnable


def test_every_example_that_runs_calls_the_stack_it_describes() -> None:
    # An example calling another address (a TLS port, another host) cannot run against the shared stack:
    # its block must say why in its first line, or the runner would report a failure that is no bug.
    for block in BLOCKS:
        for example in block.examples if not block.not_run else ():
            assert PUBLIC in example.command, f"{block.page} line {example.line} calls no {PUBLIC}"


def test_a_block_that_needs_a_gpu_other_hosts_or_a_cluster_says_so() -> None:
    unmarked = [
        f"{fence.page} line {fence.line}"
        for fence in page_fenced()
        if fence.not_run is None and any(NEEDS_MORE.search(line) for line in fence.lines)
    ]
    assert unmarked == [], "begin each with '# not run by tests/docs: WHY'"


def test_a_block_marked_not_run_says_why_and_keeps_its_examples() -> None:
    text = "```sh\n# not run by tests/docs: needs a GPU\ncurl -s localhost:8080/health\n```\n"
    (block,) = blocks(text, "docs/x.md")
    assert (block.not_run, block.name, len(block.examples)) == ("needs a GPU", "docs/x.md:2", 1)
    (plain,) = blocks(text.replace("# not run by tests/docs: needs a GPU\n", "# a comment\n"))
    assert plain.not_run is None


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


def test_a_pipe_after_the_curl_is_left_to_the_reader() -> None:
    (block,) = blocks("```sh\ncurl -s localhost:8080/openapi.json | python -m json.tool | head\n```\n")
    assert block.examples[0].argv("h:1") == ["curl", "-s", "h:1/openapi.json"]
    (quoted,) = blocks("```sh\ncurl -s localhost:8080/t -d 'a|b'\n```\n")
    assert quoted.examples[0].argv("h:1")[-1] == "a|b"


def test_every_documented_answer_parses() -> None:
    documented = [example for example in EXAMPLES if example.documented]
    assert len(documented) >= 6
    for example in documented:
        assert isinstance(shape(example.documented or ""), dict), example.line


@pytest.mark.parametrize("table", [SPECIAL, FILLED], ids=["special", "filled"])
def test_each_reviewed_entry_names_an_example_of_the_docs(table: dict[str, object]) -> None:
    for piece in table:
        assert any(piece in example.command for example in EXAMPLES), f"no example has {piece!r}"


def test_missing_names_each_documented_field_the_answer_lacks() -> None:
    expected = {"a": None, "b": {"c": None}, "d": [{"e": None}]}
    assert missing(expected, {"a": 1, "b": {"c": 2}, "d": [{"e": 3}, {"e": 4}], "extra": 5}) == []
    assert missing(expected, {"b": {}, "d": [{"e": 1}, {}]}) == [".a", ".b.c", ".d[1].e"]
    assert missing(expected, []) == ["the answer is not an object: []"]
    assert re.fullmatch(r"\.d is not a non-empty list: .*", missing({"d": [{}]}, {"d": []})[0])

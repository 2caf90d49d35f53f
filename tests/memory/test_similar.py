"""Similarity of segments: CJK by character, other scripts by word, placeholders whole; best matches."""

from __future__ import annotations

from hunyuan_serve.memory.similar import FuzzyIndex, similarity, tokens


def test_tokens_are_cjk_characters_words_placeholders_and_marks() -> None:
    assert tokens("Run {n} jobs, %(count)d <b>now</b>") == [
        "run", "{n}", "jobs", ",", "%(count)d", "<b>", "now", "</b>",
    ]  # fmt: skip
    assert tokens("生成 Stable Diffusion 图片") == ["生", "成", "stable", "diffusion", "图", "片"]


def test_one_word_changed_costs_a_word_not_its_letters() -> None:
    # 5 words, one replaced: 2 * 4 / (5 + 5) of the tokens agree.
    assert similarity("Save the current image now", "Save the current picture now") == 80.0
    # The same change within a word's letters would score far higher by characters: words are the unit.
    assert similarity("Save images", "Save imagery") == 50.0
    assert similarity("生成图片", "生成图像") == 75.0  # one character of four
    assert similarity("Hello", "hello") == 100.0


def test_a_placeholder_is_one_token_so_its_name_changing_costs_one() -> None:
    assert similarity("Found {count} files", "Found {total} files") == similarity(
        "Found 3 files", "Found 4 files"
    )


def test_the_index_gives_the_best_matches_above_the_threshold_best_first() -> None:
    index = FuzzyIndex(
        [
            ("Save the current image now", "A"),
            ("Save the current image", "B"),
            ("Delete every file", "C"),
        ]
    )
    found = index.best("Save the current picture now", 60, 5)
    assert [(m.target, m.score) for m in found] == [("A", 80.0), ("B", 66.66666666666667)]
    assert index.best("Save the current picture now", 70, 5)[0].target == "A"
    assert index.best("Save the current picture now", 90, 5) == []
    assert [m.target for m in index.best("Save the current picture now", 0, 1)] == ["A"]

"""Formatted translation's <sN> tags: markup wrapped, restored, and every lost tag reported."""

from __future__ import annotations

import pytest

from hunyuan_serve.families.format_tags import unwrap, wrap


@pytest.mark.parametrize(
    ("text", "tagged", "markup"),
    [
        ("Click <b>Save</b> now", "Click <s1>Save</s1> now", (("<b>", "</b>"),)),
        (
            '<a href="/x">Go <i>home</i></a>',
            "<s1>Go <s2>home</s2></s1>",
            (('<a href="/x">', "</a>"), ("<i>", "</i>")),
        ),
        ("Line<br/>next", "Line<s1></s1>next", (("<br/>", ""),)),
        ("a <br> b", "a <s1></s1> b", (("<br>", ""),)),
        ("stray </b> tag", "stray <s1></s1> tag", (("</b>", ""),)),
        (
            "**Bold** and *it* and `code`",
            "<s1>Bold</s1> and <s2>it</s2> and <s3>code</s3>",
            (("**", "**"), ("*", "*"), ("`", "`")),
        ),
        ("See [the docs](https://x.y/z).", "See <s1>the docs</s1>.", (("[", "](https://x.y/z)"),)),
        ("2 * 3 * 4 and snake_case_name", "2 * 3 * 4 and snake_case_name", ()),
        ("plain text", "plain text", ()),
    ],
)
def test_wrap(text: str, tagged: str, markup: tuple[tuple[str, str], ...] | None) -> None:
    wrapped = wrap(text)
    assert wrapped.text == tagged
    if markup is not None:
        assert wrapped.markup == markup
    assert wrapped.restore(wrapped.text) == text  # wrapping loses nothing


def test_unwrap_restores_the_markup_inside_target() -> None:
    wrapped = wrap("Click <b>Save</b> or **Cancel**.")
    result = unwrap("<target>点击<s1>保存</s1>或<s2>取消</s2>。</target>", wrapped)
    assert result.ok
    assert result.text == "点击<b>保存</b>或**取消**。"


def test_unwrap_without_target_tags_takes_the_whole_answer() -> None:
    result = unwrap(" 点击<s1>保存</s1> ", wrap("Click <b>Save</b>"))
    assert (result.text, result.lost) == ("点击<b>保存</b>", ())


@pytest.mark.parametrize(
    ("output", "text", "lost"),
    [
        ("<target>点击保存</target>", "点击保存", ("<b></b>",)),  # dropped
        ("<target>点击<s1>保存</target>", "点击保存", ("<b></b>",)),  # closing tag lost
        ("<target>点击</s1>保存<s1></target>", "点击保存", ("<b></b>",)),  # out of order
        ("<target><s1>点</s1>击<s1>保存</s1></target>", "点击保存", ("<b></b>",)),  # duplicated
        ("<target><s1>点击</s1><s9>保存</s9></target>", "<b>点击</b>保存", ()),  # unknown tag dropped
    ],
)
def test_a_lost_tag_is_reported_not_returned_broken(output: str, text: str, lost: tuple[str, ...]) -> None:
    result = unwrap(output, wrap("Click <b>Save</b>"))
    assert (result.text, result.lost) == (text, lost)
    assert result.ok is (not lost)

"""Placeholder protection on real Stable Diffusion WebUI strings (English keys, human zh_CN values, MIT)."""
# ruff: noqa: E501  (real WebUI strings are quoted whole)

from __future__ import annotations

import pytest

from hunyuan_serve.localization.placeholders import placeholder_problems
from hunyuan_serve.text.placeholders import find_placeholders, has_words

# (source, the placeholders found, as (kind, text))
FOUND = [
    ("Loading...", []),
    ("Save current prompts as a style. If you add the token {prompt} to the text", [("brace", "{prompt}")]),
    ("{2$$artist1|artist2|artist3}", [("brace", "{2$$artist1|artist2|artist3}")]),
    ("{{1-$$and$$__adjective__}}", [("jinja", "{{1-$$and$$__adjective__}}")]),
    (
        "I love {{ choice('red', 'blue', 'green') }} roses",
        [("jinja", "{{ choice('red', 'blue', 'green') }}")],
    ),
    (
        "{% prompt %}I love {{ colour }} roses{% endprompt %}",
        [
            ("jinja", "{% prompt %}"),
            ("jinja", "{{ colour }}"),
            ("jinja", "{% endprompt %}"),
        ],
    ),
    ("Override `Denoising strength` to 1?", [("code", "`Denoising strength`")]),
    ("search for `prevent_thread_lock` add comma", [("code", "`prevent_thread_lock`")]),
    ("Ctrl+up/down precision when editing <extra networks:0.9>", [("html", "<extra networks:0.9>")]),
    ("[datetime<Format><Time Zone>], [job_timestamp]", [("html", "<Format>"), ("html", "<Time Zone>")]),
    (
        "Model link - https://mega.nz/file/ptA2jSSB#G4INKHQG2x2pGAVQBn-yd_U5dMgevGF8YYM9CR_R1SY",
        [("url", "https://mega.nz/file/ptA2jSSB#G4INKHQG2x2pGAVQBn-yd_U5dMgevGF8YYM9CR_R1SY")],
    ),
    # Trailing prose punctuation is not part of the URL.
    (
        "see https://www.w3.org/TR/uievents-key, or leave empty",
        [("url", "https://www.w3.org/TR/uievents-key")],
    ),
    ("Allow http:// and https:// URLs for input images in API", []),
    ("format: http://127.0.0.1:port", [("url", "http://127.0.0.1:port")]),
    # '<1 means decreasing ... >1 means' is prose, not a tag.
    ("multiplied by this value. <1 means decreasing variety, >1 means increasing", []),
    ("Saved %d images to %s", [("printf", "%d"), ("printf", "%s")]),
    ("%(count)d files in %(dir)s", [("printf", "%(count)d"), ("printf", "%(dir)s")]),
    ("Denoising at 50% done", []),
    ("Click <b>Apply</b>&nbsp;now", [("html", "<b>"), ("html", "</b>"), ("entity", "&nbsp;")]),
    ("Hello {name}, you have {n:>3} items", [("brace", "{name}"), ("brace", "{n:>3}")]),
]


@pytest.mark.parametrize(("text", "expected"), FOUND)
def test_find_placeholders(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(p.kind, p.text) for p in find_placeholders(text)] == expected


# (English key, translation, expected problem fragment or None when the translation is usable)
CHECKS = [
    ("Loading...", "载入中...", None),
    # Human translations from the file that keep every placeholder pass.
    (
        "Uses a trained model file, produces WD 1.4 Tags. Model link - https://mega.nz/file/ptA2jSSB#G4INKHQG2x2pGAVQBn-yd_U5dMgevGF8YYM9CR_R1SY",
        "使用经过训练的模型文件，生成 Waifu Diffusion 1.4 标签。模型链接 - https://mega.nz/file/ptA2jSSB#G4INKHQG2x2pGAVQBn-yd_U5dMgevGF8YYM9CR_R1SY",
        None,
    ),
    (
        "Configure colors. See https://github.com/DominikDoom/a1111-sd-webui-tagcomplete#colors for info. Must be valid JSON.",
        "颜色设置，必须是有效的JSON格式，详情参见https://github.com/DominikDoom/a1111-sd-webui-tagcomplete#colors",
        None,
    ),
    (
        "Ctrl+up/down precision when editing <extra networks:0.9>",
        '使用 Ctrl + ↑/↓ 设置 "<extra networks:0.9>" 时的步长',
        None,
    ),
    (
        "{% for colour in ['red', 'blue', 'green'] %}\n        {% prompt %}I love {{ colour }} roses{% endprompt %}\n    {% endfor %}",
        "{% for colour in ['red', 'blue', 'green'] %}\n        {% prompt %}I love {{ colour }} roses{% endprompt %}\n    {% endfor %}",
        None,
    ),
    # Human translations from the file that changed a placeholder are caught.
    (
        "{2$$artist1|artist2|artist3}",
        "{2$$艺术家1|艺术家2|艺术家3}",
        "missing '{2$$artist1|artist2|artist3}'",
    ),
    ("{{1-$$and$$__adjective__}}", "{{1-3$$and$$__adjective__}}", "missing '{{1-$$and$$__adjective__}}'"),
    ("Override `Denoising strength` to 1?", "覆写 `重绘幅度` 为 1?", "missing '`Denoising strength`'"),
    (
        "To do this, open file, search for `prevent_thread_lock` add comma, paste in text, save.",
        '具体操作请打开文件并搜索 "prevent_thread_lock" ，在结尾添加逗号，粘贴并保存',
        "missing '`prevent_thread_lock`'",
    ),
    (
        "Proxy to use for fetching models and model data. Format:  http://127.0.0.1:port",
        "代理设置（格式：http://127.0.0.1:端口，请勿使用 WebUI 的端口，直接设置为梯子的端口）",
        "missing 'http://127.0.0.1:port'",
    ),
    (
        "Save current prompts as a style. If you add the token {prompt} to the text, the style use that as placeholder for your prompt when you use the style in the future.",
        "将当前的提示词保存为风格模版。如果你在文本中添加{prompt}标记，那么将来你使用该风格模版时，你现有的提示词会替换风格模版中的{prompt}",
        "unexpected '{prompt}'",
    ),
    (
        "Styles allow you to add custom text to prompt. Use the {prompt} token in style text, and it will be replaced with user's prompt when applying style.",
        "风格模版 允许用户将整段常用的提示词预设直接插入到文本框中，使用“{text}”的格式可直接替换掉原有文本框中的内容",
        "missing '{prompt}'",
    ),
    # Made-up cases for the kinds the file lacks.
    ("Saved %d images to %s", "已将 %d 张图像保存到 %s", None),
    ("Saved %d images to %s", "已保存到 %s 的图像 %d 张", "positional placeholders reordered"),
    ("%(count)d files in %(dir)s", "%(dir)s 中有 %(count)d 个文件", None),
    ("Click <b>Apply</b>", "点击<b>应用</b>", None),
    ("Click <b>Apply</b>", "点击<strong>应用</strong>", "missing '<b>', '</b>'"),
    ("Hello {name}", "你好 {名字}", "missing '{name}'"),
    ("Hello {name}", "你好 {name} {name}", "unexpected '{name}'"),
]


@pytest.mark.parametrize(("source", "translation", "problem"), CHECKS)
def test_placeholder_problems(source: str, translation: str, problem: str | None) -> None:
    problems = placeholder_problems(source, translation)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


def test_kept_terms_must_survive() -> None:
    assert placeholder_problems("Open 模型合并 now", "打开模型合并", ("模型合并",)) == []
    assert placeholder_problems("Open 模型合并 now", "打开合并", ("模型合并",)) == [
        "kept term '模型合并' lost"
    ]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("⤡", False),
        ("-", False),
        ("•", False),
        ("", False),
        ("{2$$__artist__}", False),
        (".)", False),
        ("api", True),
        ("Loading...", True),
        ("{prompt} token", True),
        ("`code` only", True),
        ("`code`", False),
    ],
)
def test_has_words(text: str, words: bool) -> None:
    assert has_words(text) is words


def test_has_words_ignores_kept_terms() -> None:
    assert has_words("Dreambooth", ["Dreambooth"]) is False
    assert has_words("Dreambooth tab", ["Dreambooth"]) is True

"""Hunyuan-MT-7B's templates and the few-shot family through the old import path, and the language table."""

from __future__ import annotations

import pytest

from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.families.detect import family_from_config
from hunyuan_serve.families.few_shot import few_shot_text
from hunyuan_serve.languages import LANGUAGES, UnknownLanguage, find_language

EN_TAIL = ", without additional explanation.\n\n"

PROMPTS = [
    ("en", "zh", "Hello, world.", "把下面的文本翻译成中文，不要额外解释。\n\nHello, world."),
    ("zh", "en", "你好，世界。", "把下面的文本翻译成英语，不要额外解释。\n\n你好，世界。"),
    ("zh", "ja", "你好，世界。", "把下面的文本翻译成日语，不要额外解释。\n\n你好，世界。"),
    ("en", "fr", "Hello, world.", "Translate the following segment into French" + EN_TAIL + "Hello, world."),
    ("ja", "ko", "こんにちは", "Translate the following segment into Korean" + EN_TAIL + "こんにちは"),
    ("zh-Hant", "en", "你好嗎？", "把下面的文本翻译成英语，不要额外解释。\n\n你好嗎？"),
    ("en", "zh-Hant", "Hi", "把下面的文本翻译成繁体中文，不要额外解释。\n\nHi"),
    ("en", "ug", "Good morning", "Translate the following segment into Uyghur" + EN_TAIL + "Good morning"),
    ("zh", "bo", "早上好", "把下面的文本翻译成藏语，不要额外解释。\n\n早上好"),
    ("zh-TW", "yue", "早安", "把下面的文本翻译成粤语，不要额外解释。\n\n早安"),
    ("yue", "en", "早晨", "Translate the following segment into English" + EN_TAIL + "早晨"),
]


# Source: Tencent-Hunyuan/Hunyuan-MT, README.md, "Prompts" (ZH<=>XX and XX<=>XX templates).
@pytest.mark.parametrize(("src", "tgt", "text", "expected"), PROMPTS)
@pytest.mark.parametrize("family", ["hunyuan-mt", "hunyuan"])  # the old name still works
def test_hunyuan_prompt_is_the_model_cards(family: str, src: str, tgt: str, text: str, expected: str) -> None:
    prompt = build_prompt(family, find_language(src), find_language(tgt), text)
    assert prompt.messages == ({"role": "user", "content": expected},)
    assert prompt.is_chat
    assert prompt.stop == ()


def test_few_shot_prompt_for_the_base_model() -> None:
    text = few_shot_text(find_language("en"), find_language("zh"), "Save image")
    assert text.startswith("English: Open file\nChinese: 打开文件\nEnglish: Delete\nChinese: 删除\n")
    assert text.endswith("English: Enable\nChinese: 启用\nEnglish: Save image\nChinese:")
    prompt = build_prompt("few-shot", find_language("en"), find_language("zh"), "Save image")
    assert prompt.stop == ("\n",)
    assert not prompt.is_chat


def test_few_shot_without_examples_is_zero_shot_and_one_line() -> None:
    text = few_shot_text(find_language("ug"), find_language("bo"), "line one\nline two")
    assert text == "Uyghur: line one line two\nTibetan:"


@pytest.mark.parametrize(
    ("setting", "config", "expected"),
    [
        ("auto", {"model_type": "hunyuan_v1_dense", "_name_or_path": "tencent/Hunyuan-MT-7B"}, "hunyuan-mt"),
        ("auto", {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"]}, "few-shot"),
        ("hunyuan", {"model_type": "gemma3_text"}, "hunyuan-mt"),
        ("few_shot", {"model_type": "hunyuan_v1_dense"}, "few-shot"),
        ("hy-mt2", {}, "hy-mt2"),
    ],
)
def test_family_from_config_through_the_old_path(setting: str, config: dict[str, str], expected: str) -> None:
    assert family_from_config(setting, config) == expected


def test_family_rejects_unknown_setting() -> None:
    with pytest.raises(ValueError, match="prompt family"):
        family_from_config("chat", {})


def test_the_model_cards_38_languages() -> None:
    codes = [lang.code for lang in LANGUAGES]
    expected = [
        "zh",
        "en",
        "fr",
        "pt",
        "es",
        "ja",
        "tr",
        "ru",
        "ar",
        "ko",
        "th",
        "it",
        "de",
        "vi",
        "ms",
        "id",
        "tl",
        "hi",
        "zh-Hant",
        "pl",
        "cs",
        "nl",
        "km",
        "my",
        "fa",
        "gu",
        "ur",
        "te",
        "mr",
        "he",
        "bn",
        "ta",
        "uk",
        "bo",
        "kk",
        "mn",
        "ug",
        "yue",
    ]
    assert codes == expected
    assert all(lang.chinese_name and lang.native_name for lang in LANGUAGES)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("ZH", "zh"),
        ("zh-CN", "zh"),
        ("zh_cn", "zh"),
        ("zh-Hans", "zh"),
        ("cn", "zh"),
        ("zh-TW", "zh-Hant"),
        ("zh_TW", "zh-Hant"),
        ("zh-HK", "zh-Hant"),
        ("ZH-HANT", "zh-Hant"),
        ("  en ", "en"),
        ("en-US", "en"),
        ("English", "en"),
        ("pt-BR", "pt"),
        ("fil", "tl"),
        ("iw", "he"),
        ("YUE", "yue"),
        ("Uyghur", "ug"),
    ],
)
def test_language_lookup_is_case_insensitive_with_aliases(code: str, expected: str) -> None:
    assert find_language(code).code == expected


@pytest.mark.parametrize("code", ["", "xx", "zh-XX", "klingon", "en;drop"])
def test_unknown_language_lists_supported(code: str) -> None:
    with pytest.raises(UnknownLanguage, match="supported: zh, en, fr") as info:
        find_language(code)
    assert "yue" in str(info.value)

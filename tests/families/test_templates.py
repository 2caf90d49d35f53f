"""Table tests pinning each family's exact user message, each row naming the README it comes from."""

from __future__ import annotations

from typing import Any

import pytest

from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.families.hy_mt2 import delimiters, personalization, structured
from hunyuan_serve.languages import find_language

HUNYUAN_MT_README = "Tencent-Hunyuan/Hunyuan-MT, README.md, Prompts"
HY_MT15_README = "Tencent-Hunyuan/HY-MT, README.md (= README_CN.md), Prompts"
HY_MT2_README = "Tencent-Hunyuan/Hy-MT2, README.md (= README_CN.md), Translation Task Instruction Examples"

HY15_ZH = "将以下文本翻译为{t}，注意只需要输出翻译后的结果，不要额外解释：\n\n"
HY15_EN = "Translate the following segment into {t}, without additional explanation.\n\n"
HY15_TERMS_TAIL = "\n将以下文本翻译为{t}，注意只需要输出翻译后的结果，不要额外解释：\n"
HY2_EN = "Translate the following text into {t}. Note that you should only output the translated result without any additional explanation:\n\n"  # noqa: E501
HY2_EN_TERMS_TAIL = "\nTranslate the following text into {t}. Note that you must ONLY output the translated result without any additional explanation:\n\n"  # noqa: E501
THREE = [
    {"source": "GPU", "target": "显卡"},
    {"source": "checkpoint", "target": "检查点"},
    {"source": "LoRA", "target": "LoRA"},
]
THREE_TEXT = "Load the LoRA checkpoint on the GPU."

# (source, family, from, to, text, keyword arguments, expected user message)
ROWS: list[tuple[str, str, str, str, str, dict[str, Any], str]] = [
    # Hunyuan-MT-7B: its two templates, no features.
    (HUNYUAN_MT_README, "hunyuan-mt", "en", "zh", "Hi", {}, "把下面的文本翻译成中文，不要额外解释。\n\nHi"),
    (
        HUNYUAN_MT_README,
        "hunyuan-mt",
        "zh",
        "fr",
        "你好",
        {},
        "把下面的文本翻译成法语，不要额外解释。\n\n你好",
    ),
    (
        HUNYUAN_MT_README,
        "hunyuan-mt",
        "en",
        "fr",
        "Hi",
        {},
        "Translate the following segment into French, without additional explanation.\n\nHi",
    ),
    # HY-MT1.5: new ZH<=>XX wording, the same XX<=>XX one, and its three feature templates.
    (HY_MT15_README, "hy-mt1.5", "en", "zh", "Hi", {}, HY15_ZH.format(t="中文") + "Hi"),
    (HY_MT15_README, "hy-mt1.5", "zh-Hant", "ja", "你好", {}, HY15_ZH.format(t="日语") + "你好"),
    (HY_MT15_README, "hy-mt1.5", "de", "en", "Hallo", {}, HY15_EN.format(t="English") + "Hallo"),
    (
        HY_MT15_README,
        "hy-mt1.5",
        "en",
        "zh",
        "The GPU is fast.",
        {"glossary": {"GPU": "显卡", "CPU": "处理器"}},  # CPU is not in the text: not sent
        "参考下面的翻译：\nGPU 翻译成 显卡\n" + HY15_TERMS_TAIL.format(t="中文") + "The GPU is fast.",
    ),
    (
        HY_MT15_README,
        "hy-mt1.5",
        "en",
        "zh",
        THREE_TEXT,
        {"glossary": THREE},
        "参考下面的翻译：\nGPU 翻译成 显卡\ncheckpoint 翻译成 检查点\nLoRA 翻译成 LoRA\n"
        + HY15_TERMS_TAIL.format(t="中文")
        + THREE_TEXT,
    ),
    (
        HY_MT15_README,
        "hy-mt1.5",
        "en",
        "de",
        "It is cold.",
        {"context": "We talk about the weather."},
        "We talk about the weather.\n参考上面的信息，把下面的文本翻译成德语，"
        "注意不需要翻译上文，也不要额外解释：\nIt is cold.",
    ),
    (
        HY_MT15_README,
        "hy-mt1.5",
        "en",
        "ja",
        "Click <b>Save</b> or **Cancel**.",
        {"preserve_format": True},
        "将以下<source></source>之间的文本翻译为日语，注意只需要输出翻译后的结果，不要额外解释，"
        "原文中的<sn></sn>标签表示标签内文本包含格式信息，需要在译文中相应的位置尽量保留该标签。"
        "输出格式为：<target>str</target>\n\n<source>Click <s1>Save</s1> or <s2>Cancel</s2>.</source>",
    ),
    # Hy-MT2: Chinese column when Chinese is on either side, English column otherwise.
    (HY_MT2_README, "hy-mt2", "en", "zh", "Hi", {}, HY15_ZH.format(t="中文") + "Hi"),
    (HY_MT2_README, "hy-mt2", "fr", "de", "Salut", {}, HY2_EN.format(t="German") + "Salut"),
    (
        HY_MT2_README,
        "hy-mt2",
        "zh",
        "en",
        "显卡很快。",
        {"glossary": [{"source": "显卡", "target": "GPU"}]},
        "参考下面的翻译：\n显卡 翻译成 GPU\n"
        "将以下文本翻译为英语，注意只需要输出翻译后的结果，不要额外解释：\n\n显卡很快。",
    ),
    (
        HY_MT2_README,
        "hy-mt2",
        "en",
        "fr",
        THREE_TEXT,
        {"glossary": THREE},
        "Reference the following translations:\nGPU translates to 显卡\ncheckpoint translates to 检查点\n"
        "LoRA translates to LoRA\n" + HY2_EN_TERMS_TAIL.format(t="French") + THREE_TEXT,
    ),
    (
        HY_MT2_README,
        "hy-mt2",
        "en",
        "zh",
        "It is cold.",
        {"context": "A weather report."},
        "【背景信息】\nA weather report.\n\n请结合背景信息将以下文本翻译为中文。"
        "\n\n【待翻译文本】\nIt is cold.",
    ),
    (
        HY_MT2_README,
        "hy-mt2",
        "en",
        "es",
        "It is cold.",
        {"context": "A weather report."},
        "[Background Information]\nA weather report.\n\nPlease translate the following text into Spanish, "
        "taking the provided background information into consideration.\n\n[Source Text]\nIt is cold.",
    ),
    (
        HY_MT2_README,
        "hy-mt2",
        "en",
        "zh",
        "Hello there.",
        {"style": "古风"},
        "请将以下文本翻译为中文。\n注意翻译的风格要严格符合【古风】\n\nHello there.",
    ),
    (
        HY_MT2_README,
        "hy-mt2",
        "en",
        "it",
        "Hello there.",
        {"style": "formal business email"},
        "Please translate the following text into Italian. Note that the translation style must strictly "
        "conform to [formal business email]:\n\nHello there.",
    ),
]


@pytest.mark.parametrize(
    ("source", "family", "src", "tgt", "text", "kwargs", "expected"),
    ROWS,
    ids=[f"{r[1]}-{r[2]}-{r[3]}-{'+'.join(r[5]) or 'plain'}-{n}" for n, r in enumerate(ROWS)],
)
def test_user_message_is_the_readmes(
    source: str, family: str, src: str, tgt: str, text: str, kwargs: dict[str, Any], expected: str
) -> None:
    prompt = build_prompt(family, find_language(src), find_language(tgt), text, **kwargs)
    assert prompt.messages == ({"role": "user", "content": expected},), source
    assert prompt.stop == ()


def test_hy_mt2_table_beats_its_transformers_example() -> None:
    # Hy-MT2's README code example says "将以下文本翻译成英语,注意只需要输出翻译后的结果,不要额外解释:"
    # (成, ASCII punctuation) where its template table says 翻译为 and full-width "，" "：". The table is
    # pinned: it is the documented template, the example a quick demo.
    content = build_prompt("hy-mt2", find_language("zh"), find_language("en"), "今天天气真好。").messages[0]
    assert (
        content["content"]
        == "将以下文本翻译为英语，注意只需要输出翻译后的结果，不要额外解释：\n\n今天天气真好。"
    )


def test_hy_mt2_personalization_delimiters_structured() -> None:
    # Source: HY_MT2_README, rows Personalization, Delimiters, Structured Data 1.
    en, zh, ja = find_language("en"), find_language("zh"), find_language("ja")
    prompt = personalization(en, zh, "Hi", ["保留人名", "口语化"])
    assert prompt.messages[0]["content"] == (
        "【待翻译文本】\nHi\n\n【翻译任务】\n1、保留人名\n2、口语化\n3、将【待翻译文本】翻译为中文。"
    )
    prompt = personalization(en, ja, "Hi", ["Keep names"])
    assert prompt.messages[0]["content"] == (
        "[Source Text]\nHi\n\n[Translation Tasks]\n1. Keep names\n"
        "2. Translate the [Source Text] into Japanese."
    )
    assert (
        delimiters(en, ja, "a|b")
        .messages[0]["content"]
        .endswith("and pay close attention to their placement.\n\na|b")
    )
    assert delimiters(en, zh, "a|b").messages[0]["content"].startswith("请将以下文本准确翻译为中文。\n你必须")
    data = structured(zh, '{"k": "v"}', "JSON").messages[0]["content"]
    assert data.startswith(
        "### Task\nTranslate the user-facing text within the following JSON data into Chinese."
    )
    assert data.endswith('### Source Data\n{"k": "v"}')


def test_few_shot_stays_a_completion_prompt() -> None:
    prompt = build_prompt("few-shot", find_language("en"), find_language("fr"), "Save")
    assert not prompt.is_chat
    assert prompt.text.endswith("English: Save\nFrench:")
    assert prompt.stop == ("\n",)

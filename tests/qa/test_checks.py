"""Each answer check on answers that fail it and on answers that rightly look alike, table by table."""

from __future__ import annotations

import pytest

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.qa import flags
from hunyuan_serve.qa.check import Answer, check, check_generation
from hunyuan_serve.qa.flags import Flag, header_value
from hunyuan_serve.qa.loops import longest_repeat

CFG = QaSettings()
EN_LONG = "The weather is nice today, so let us all go for a long walk in the park."
ZH_LONG = "今天天气很好，我们大家一起去公园里散步很久吧。"
FR_LONG = "Il fait beau aujourd'hui, allons tous faire une longue promenade dans le parc."
# One paragraph of 50 sentences ("The red cat sleeps."), and its translation sentence by sentence.
_COLORS = {"red": "红", "blue": "蓝", "green": "绿", "black": "黑", "white": "白"}
_COLORS |= {"grey": "灰", "brown": "棕", "pink": "粉", "gold": "金", "silver": "银"}
_ANIMALS = {"cat": "猫", "dog": "狗", "horse": "马", "bird": "鸟", "fish": "鱼"}
FIFTY_EN = " ".join(f"The {color} {animal} sleeps." for color in _COLORS for animal in _ANIMALS)
FIFTY_ZH = [
    f"{zh_color}色的{zh_animal}在睡觉。" for zh_color in _COLORS.values() for zh_animal in _ANIMALS.values()
]


def names(source: str, output: str, pair: str = "en-zh", reason: str = "stop") -> list[str]:
    source_lang, target_lang = pair.split("-", 1)
    return [flag.check for flag in check(Answer(source, output, source_lang, target_lang, reason), CFG)]


# (what, source, answer, pair, reason, the checks it fails)
FAILING = [
    ("English for Chinese", FR_LONG, EN_LONG, "fr-zh", "stop", ["wrong_language"]),
    ("Chinese for French", EN_LONG, ZH_LONG, "en-fr", "stop", ["wrong_language"]),
    ("English for French, in Latin", ZH_LONG, EN_LONG, "zh-fr", "stop", ["wrong_language"]),
    ("the source sent back", EN_LONG, EN_LONG, "en-fr", "stop", ["wrong_language", "echo"]),
    ("a loop", "Finally, lock it.", "最后，最终，封锁，封锁，封锁，封锁，封锁", "en-zh", "stop", ["loop"]),
    ("cut at max_tokens", EN_LONG, ZH_LONG[:8], "en-zh", "length", ["truncated", "length_ratio"]),
    ("a line lost", "Open\nSave\nClose", "打开\n保存", "en-zh", "stop", ["lines"]),
    (
        "a paragraph lost",
        "First part.\n\nSecond part.",
        "第一部分。第二部分。",
        "en-zh",
        "stop",
        ["lines", "paragraphs"],
    ),
    ("a number lost", "Delete 3 files", "删除文件", "en-zh", "stop", ["numbers"]),
    ("a URL lost", "See https://example.org/docs for more", "更多信息见文档", "en-zh", "stop", ["urls"]),
    (
        "a placeholder lost",
        "Hello, {name}! You have %d messages",
        "你好！你有%d条消息",
        "en-zh",
        "stop",
        ["placeholders"],
    ),
    ("a tag lost", "Press <b>Save</b> now", "现在按保存", "en-zh", "stop", ["markup"]),
    ("code changed", "Run `pip install -e .` first", "先运行 `pip 安装`", "en-zh", "stop", ["markup"]),
    ("far too short", EN_LONG + " " + EN_LONG, "好。", "en-zh", "stop", ["length_ratio"]),
    ("sentences dropped", "One. Two. Three. Four. Five.", "一。", "en-zh", "stop", ["sentences"]),
    ("4 sentences of 50 dropped", FIFTY_EN, "".join(FIFTY_ZH[:46]), "en-zh", "stop", ["sentences"]),
    ("a loop in mixed script", "Set A to 1.", "将A设置为1。" * 4, "en-zh", "stop", ["loop"]),
    (
        "a list item said twice",
        "Last, final, lockdown, blockade",
        "最后, 最终, 封锁, 封锁",
        "en-zh",
        "stop",
        ["loop"],
    ),
    (
        "a sentence said twice",
        "Lock the layer, then save it.",
        "锁定图层。锁定图层。",
        "en-zh",
        "stop",
        ["loop"],
    ),
]


@pytest.mark.parametrize(
    ("what", "source", "output", "pair", "reason", "expected"), FAILING, ids=[r[0] for r in FAILING]
)
def test_an_answer_that_fails_a_check_is_flagged_with_that_check(
    what: str, source: str, output: str, pair: str, reason: str, expected: list[str]
) -> None:
    assert names(source, output, pair, reason) == expected, what


# (what, source, answer, pair): answers a translator would rightly give, that must pass every check.
PASSING = [
    ("a good translation", EN_LONG, ZH_LONG, "en-zh"),
    ("into French", EN_LONG, FR_LONG, "en-fr"),
    ("a short label", "Save", "保存", "en-zh"),
    ("a name kept", "DeepBooru", "DeepBooru", "en-zh"),
    ("a name of one word and a letter", "Euler a", "Euler a", "en-zh"),
    ("an identifier kept", "hidden_idx_next", "hidden_idx_next", "en-zh"),
    (
        "English terms in Chinese",
        "Tile overlap for ESRGAN upscalers, in pixels.",
        "ESRGAN 的图块重叠(Tile overlap)像素",
        "en-zh",
    ),
    (
        "Han only, which the detector takes for Japanese",
        "number of images to delete next",
        "接下来要连续删除的图像数",
        "en-zh",
    ),
    (
        "close languages",
        "今天天气很好，我们一起去公园散步吧。",
        "今天天氣很好，我們一起去公園散步吧。",
        "zh-zh-Hant",
    ),
    (
        "numbers in other forms",
        "Copy 1,000 files in 3-column mode at 0.50",
        "以三列模式复制 1000 个文件，0.5",
        "en-zh",
    ),
    ("numbers inside words", "Send to img2img, v1.1.4, Size-1", "发送到图生图", "en-zh"),
    ("a repeat the source has", "ha ha ha ha ha", "哈哈哈哈哈", "en-zh"),
    (
        "placeholders and tags kept",
        "Hi {name}, press <b>OK</b> (%s)",
        "{name}你好，按<b>确定</b>（%s）",
        "en-zh",
    ),
    (
        "a URL kept, its dot not part of it",
        "Docs: https://example.org/a.",
        "文档：https://example.org/a。",
        "en-zh",
    ),
    ("lines kept", "Open\nSave\nClose", "打开\n保存\n关闭", "en-zh"),
    (
        "a wrapped line joined",
        "A long line of text\n    continued here.",
        "一行很长的文字，在这里继续。",
        "en-zh",
    ),
    ("a label in backticks translated", "Override `Sampling method` now", "现在覆写 `采样器`", "en-zh"),
    # Latin letters inside Han text are words of their own: "将A…将B…" is no loop of 将设置为.
    (
        "Latin names inside Han",
        "Set A to 1. Set B to 2. Set C to 3. Set D to 4.",
        "将A设置为1。将B设置为2。将C设置为3。将D设置为4。",
        "en-zh",
    ),
    ("Latin axes inside Han", "X axis, Y axis, Z axis, W axis", "X轴、Y轴、Z轴、W轴", "en-zh"),
    ("Latin layers inside Han", "Layer A, layer B, layer C, layer D", "A层、B层、C层、D层", "en-zh"),
    (
        "a term in Latin inside Han",
        "Open the LoRA tab, then the LoRA list, then the LoRA file.",
        "打开LoRA选项卡，然后打开LoRA列表，然后打开LoRA文件。",
        "en-zh",
    ),
    # Numbers are units of a loop too: 插槽1、插槽2 is no loop of 插槽.
    ("numbered items", "Slots 1, 2, 3 and 4 are free.", "插槽1、插槽2、插槽3、插槽4均空闲。", "en-zh"),
    ("a list item the source repeats", "Lock, lock!", "封锁，封锁！", "en-zh"),
    ("a repeat the source has in another form", "Very, very good", "非常、非常好", "en-zh"),
    (
        "3 sentences of 50 merged into others",
        FIFTY_EN,
        "".join(FIFTY_ZH[:47]),
        "en-zh",
    ),
]


@pytest.mark.parametrize(("what", "source", "output", "pair"), PASSING, ids=[r[0] for r in PASSING])
def test_an_answer_a_translator_would_give_passes(what: str, source: str, output: str, pair: str) -> None:
    assert names(source, output, pair) == [], what


def test_every_flag_names_a_known_check_and_says_what_was_wrong() -> None:
    for _, source, output, pair, reason, _ in FAILING:
        src, tgt = pair.split("-", 1)
        for flag in check(Answer(source, output, src, tgt, reason), CFG):
            assert flag.check in flags.CHECKS and flag.detail, flag
    [number] = check(Answer("Delete 3 files", "删除文件", "en", "zh"), CFG)
    assert number.detail == "number of the source missing from the answer: 3"


def test_thresholds_are_the_config_fields() -> None:
    # Five repeats are not a loop when five are allowed; the detector is not consulted when unsure.
    assert names("Lock it.", "封锁封锁封锁封锁") == ["loop"]
    lenient = QaSettings(qa_loop_repeats=5)
    assert check(Answer("Lock it.", "封锁封锁封锁封锁", "en", "zh"), lenient) == []
    strict = QaSettings(qa_ratio_high=1.0, qa_ratio_min_chars=5, qa_ratio_min_words=1)
    assert [
        f.check for f in check(Answer("Open the file", "打开那个文件然后再打开", "en", "zh"), strict)
    ] == ["length_ratio"]


def test_the_new_loop_and_sentence_thresholds_are_config_fields() -> None:
    # A list item three times in a row is a loop when three are asked for; twice is not.
    assert names("Last, final, lockdown, blockade", "最后，最终，封锁，封锁") == ["loop"]
    three = QaSettings(qa_loop_item_repeats=3)
    assert check(Answer("Last, final, lockdown, blockade", "最后，最终，封锁，封锁", "en", "zh"), three) == []
    thrice = check(Answer("Last, final, lockdown, blockade", "最后，封锁，封锁，封锁", "en", "zh"), three)
    assert [f.check for f in thrice] == ["loop"] and "'封锁' comes 3 times in a row" in thrice[0].detail
    # Four of 50 sentences lost is flagged by default; allowing four passes it, the share rule still holds.
    lenient = QaSettings(qa_sentences_max_lost=4)
    assert check(Answer(FIFTY_EN, "".join(FIFTY_ZH[:46]), "en", "zh"), lenient) == []
    assert [f.check for f in check(Answer(FIFTY_EN, "".join(FIFTY_ZH[:25]), "en", "zh"), lenient)] == [
        "sentences"
    ]


def test_a_prompt_as_written_gets_the_checks_that_need_no_languages() -> None:
    assert [f.check for f in check_generation("a b a b a b a b a b", "length", CFG)] == ["loop", "truncated"]
    assert check_generation("A fine answer.", "stop", CFG) == []
    # With no source to compare with, an item said twice is not judged ("Yes, yes.").
    assert check_generation("Yes, yes.", "stop", CFG) == []


def test_the_longest_repeat_is_found_for_phrases_of_several_units() -> None:
    assert longest_repeat(["x", "a", "b", "c", "a", "b", "c", "a", "b", "c", "y"], 8) == (3, ("a", "b", "c"))
    assert longest_repeat(["a"], 8) == (1, ())


def test_the_header_lists_each_flagged_text_by_index_and_counts_past_its_limit() -> None:
    echo, loop = Flag("echo", "e"), Flag("loop", "l")
    assert header_value([[], []]) == "ok"
    assert header_value([[echo, loop], [], [], [Flag("wrong_language", "w")], []]) == (
        "flagged 2/5: 0=echo,loop; 3=wrong_language"
    )
    many = header_value([[echo]] * (flags.MAX_LISTED + 2))
    assert many.endswith("; +2 more") and many.startswith(f"flagged {flags.MAX_LISTED + 2}/")
    assert len(header_value([[Flag(name, "") for name in flags.CHECKS]] * 128)) < 4096

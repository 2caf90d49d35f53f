"""The echo and length checks by writing system: words counted per script, echoes across scripts."""

from __future__ import annotations

import pytest

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.qa.check import Answer, check
from hunyuan_serve.qa.ratio import length_in_words

CFG = QaSettings()

# (text, its length in words): a run of letters or digits where words are written apart, a share of
# a word per letter where they are not.
WORDS = [
    ("Open the file", 3),
    ("don't over-write 3 files.", 6),
    ("打开文件", 4 * 0.55),
    ("IPv4 地址", 1 + 2 * 0.55),
    ("ファイルを開く", 7 * 0.55),
    ("파일 열기", 2),  # Hangul writes words apart
    ("हिन्दी भाषा", 2),  # a vowel sign inside a word does not end it
    ("فتح الملف", 2),
    ("Открыть файл", 2),
    ("เปิดไฟล์", 8 * 0.3),  # Thai: every character of its block, vowel signs too
    ("", 0),
    ("，。！？、", 0),
]


@pytest.mark.parametrize(("text", "expected"), WORDS)
def test_a_text_is_measured_in_words_or_shares_of_one(text: str, expected: float) -> None:
    assert length_in_words(text) == pytest.approx(expected)


def test_punctuation_and_symbols_part_words_and_are_none() -> None:
    assert length_in_words("%(value)s “%s” — <b>") == 4  # value · s · s · b: codes are words to this count
    assert length_in_words("a—b…c·d") == 4


def names(source: str, output: str, pair: str, cfg: QaSettings = CFG) -> list[str]:
    source_lang, target_lang = pair.split("-", 1)
    return [flag.check for flag in check(Answer(source, output, source_lang, target_lang), cfg)]


SLUG = "Enter a valid “slug” consisting of letters, numbers, underscores or hyphens."
SLUG_ZH = "输入由字母，数字，下划线或连字符号组成的有效“字段”。"
TIME = "“%(value)s” value has an invalid format. It must be in HH:MM[:ss[.uuuuuu]] format."
TIME_ZH = "“%(value)s”的值有一个错误的格式。它的格式应该是HH:MM[:ss[.uuuuuu]]"

# (what, source, answer, pair, the checks it fails): Django's own zh_Hans strings and their faults.
TABLE = [
    ("Django's translation", SLUG, SLUG_ZH, "en-zh", []),
    ("its first quarter", SLUG, SLUG_ZH[: len(SLUG_ZH) // 4], "en-zh", ["length_ratio"]),
    # A code kept in the answer counts as the words it is in the source, so a cut answer keeping one
    # is still short, and a whole answer with many is not long.
    ("a translation keeping a code", TIME, TIME_ZH, "en-zh", []),
    ("its first quarter, the code kept", TIME, TIME_ZH[: len(TIME_ZH) // 4], "en-zh", ["length_ratio"]),
    (
        "into Japanese",
        "Open the selected file in a new window now.",
        "選択したファイルを新しいウィンドウで今すぐ開きます。",
        "en-ja",
        [],
    ),
    (
        "into Korean",
        "Open the selected file in a new window now.",
        "선택한 파일을 지금 새 창에서 엽니다.",
        "en-ko",
        [],
    ),
    (
        "into German",
        "Open the selected file in a new window now.",
        "Öffnen Sie die ausgewählte Datei jetzt in einem neuen Fenster.",
        "en-de",
        [],
    ),
    (
        "into German, cut",
        "Open the selected file in a new window now.",
        "Öffnen Sie",
        "en-de",
        ["length_ratio"],
    ),
    (
        "Chinese far too long",
        "Open the selected file in a new window now.",
        "打开" * 60,
        "en-zh",
        ["loop", "length_ratio"],
    ),
    # Two ordinary words sent back into a language of another script: no translation.
    ("two words sent back into Chinese", "Email address", "Email address", "en-zh", ["echo"]),
    ("two words sent back into Japanese", "Open file", "Open file", "en-ja", ["echo"]),
    ("two Chinese words sent back into English", "打开文件", "打开文件", "zh-en", ["echo"]),
    # A name of one word, a term beside the target's own script, or two words in the same script pass.
    ("a one-word name kept", "DeepBooru", "DeepBooru", "en-zh", []),
    ("a term kept beside Chinese", "Email address", "Email 地址", "en-zh", []),
    ("two words kept in French", "Email address", "Email address", "en-fr", []),
    ("an acronym and a word", "IPv4 address", "IPv4 address", "en-zh", []),
]


@pytest.mark.parametrize(
    ("what", "source", "output", "pair", "expected"), TABLE, ids=[row[0] for row in TABLE]
)
def test_echo_and_length_by_script(
    what: str, source: str, output: str, pair: str, expected: list[str]
) -> None:
    assert names(source, output, pair) == expected, what


def test_the_echo_and_length_thresholds_are_config_fields() -> None:
    three = QaSettings(qa_echo_min_words_other_script=3)
    assert names("Email address", "Email address", "en-zh", three) == []
    # Never more lenient within a script than across: the lower of the two fields holds.
    assert names("Email address", "Email address", "en-zh", QaSettings(qa_echo_min_words=2)) == ["echo"]
    cut = SLUG_ZH[: len(SLUG_ZH) // 4]
    assert names(SLUG, cut, "en-zh", QaSettings(qa_ratio_low=0.2)) == []
    assert names(SLUG, cut, "en-zh", QaSettings(qa_ratio_min_words=20)) == []
    assert names(SLUG, cut, "en-zh", QaSettings(qa_ratio_min_chars=80)) == []

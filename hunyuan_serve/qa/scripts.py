"""Writing systems: which script a letter is in, and which scripts each of the 38 languages writes in."""

from __future__ import annotations

import bisect
import functools
import re
from collections import Counter

LATIN, HAN, KANA, HANGUL, CYRILLIC, ARABIC = "Latin", "Han", "Kana", "Hangul", "Cyrillic", "Arabic"
# First code point, last code point, script: the blocks our languages' letters come from.
_BLOCKS = sorted(
    [
        (0x0041, 0x024F, LATIN),  # ASCII letters to Latin Extended-B (digits are not letters: see below)
        (0x1E00, 0x1EFF, LATIN),  # Latin Extended Additional (Vietnamese)
        (0x0370, 0x03FF, "Greek"),
        (0x0400, 0x052F, CYRILLIC),
        (0x0590, 0x05FF, "Hebrew"),
        (0x0600, 0x06FF, ARABIC),
        (0x0750, 0x077F, ARABIC),
        (0xFB50, 0xFDFF, ARABIC),
        (0xFE70, 0xFEFF, ARABIC),
        (0x0900, 0x097F, "Devanagari"),
        (0x0980, 0x09FF, "Bengali"),
        (0x0A80, 0x0AFF, "Gujarati"),
        (0x0B80, 0x0BFF, "Tamil"),
        (0x0C00, 0x0C7F, "Telugu"),
        (0x0E00, 0x0E7F, "Thai"),
        (0x0F00, 0x0FFF, "Tibetan"),
        (0x1000, 0x109F, "Myanmar"),
        (0x1780, 0x17FF, "Khmer"),
        (0x1800, 0x18AF, "Mongolian"),
        (0x1100, 0x11FF, HANGUL),
        (0x3130, 0x318F, HANGUL),
        (0xAC00, 0xD7AF, HANGUL),
        (0x3040, 0x30FF, KANA),
        (0x31F0, 0x31FF, KANA),
        (0xFF66, 0xFF9D, KANA),
        (0x3400, 0x4DBF, HAN),
        (0x4E00, 0x9FFF, HAN),
        (0xF900, 0xFAFF, HAN),
        (0x20000, 0x2FA1F, HAN),
    ]
)
_STARTS = [block[0] for block in _BLOCKS]
# Scripts whose characters each say about as much as three letters of an alphabet: they count 3.
DENSE = frozenset({HAN, KANA, HANGUL})
DENSE_WEIGHT = 3

_LATIN_LANGUAGES = ("en", "fr", "pt", "es", "tr", "it", "de", "vi", "ms", "id", "tl", "pl", "cs", "nl")
LANGUAGE_SCRIPTS: dict[str, frozenset[str]] = {
    **{code: frozenset({LATIN}) for code in _LATIN_LANGUAGES},
    **{code: frozenset({HAN}) for code in ("zh", "zh-Hant", "yue")},
    "ja": frozenset({HAN, KANA}),
    "ko": frozenset({HANGUL, HAN}),
    **{code: frozenset({CYRILLIC}) for code in ("ru", "uk", "kk")},
    # Mongolian is written in Cyrillic in Mongolia and in its own script in China.
    "mn": frozenset({CYRILLIC, "Mongolian"}),
    **{code: frozenset({ARABIC}) for code in ("ar", "fa", "ur", "ug")},
    **{code: frozenset({"Devanagari"}) for code in ("hi", "mr")},
    "th": frozenset({"Thai"}),
    "km": frozenset({"Khmer"}),
    "my": frozenset({"Myanmar"}),
    "gu": frozenset({"Gujarati"}),
    "te": frozenset({"Telugu"}),
    "he": frozenset({"Hebrew"}),
    "bn": frozenset({"Bengali"}),
    "ta": frozenset({"Tamil"}),
    "bo": frozenset({"Tibetan"}),
}


def script_of(char: str) -> str | None:
    """The script of a letter, or None for what is in no script (digits, punctuation, symbols, space)."""
    point = ord(char)
    if point < 0x80:
        return LATIN if char.isalpha() else None
    index = bisect.bisect_right(_STARTS, point) - 1
    if index < 0:
        return None
    _, last, script = _BLOCKS[index]
    return script if point <= last and char.isalpha() else None


def letters(text: str) -> Counter[str]:
    """The text's letters counted by script (a dense script's character counts DENSE_WEIGHT).

    ASCII letters are counted in C (what is left of the text once encoded to ASCII); only the other
    characters are looked up, each once per process.
    """
    counts: Counter[str] = Counter()
    ascii_letters = len(_NOT_ASCII_LETTER.sub("", text))
    if ascii_letters:
        counts[LATIN] = ascii_letters
    for char in text:
        if char >= "\x80":
            script = _script_of_wide(char)
            if script is not None:
                counts[script] += DENSE_WEIGHT if script in DENSE else 1
    return counts


_NOT_ASCII_LETTER = re.compile(r"[^A-Za-z]+")


@functools.cache
def _script_of_wide(char: str) -> str | None:
    return script_of(char)


# Languages the detector confuses and a translation between them may rightly leave much as it was.
_CLOSE = (frozenset({"zh", "zh-Hant", "yue"}), frozenset({"ms", "id"}), frozenset({"hi", "mr"}))


def relatives(code: str) -> frozenset[str]:
    """`code` and the languages close enough that neither check flags one for the other."""
    for group in _CLOSE:
        if code in group:
            return group
    return frozenset({code})


@functools.cache
def sharing(code: str) -> frozenset[str]:
    """The languages written in one of `code`'s scripts (itself included)."""
    own = LANGUAGE_SCRIPTS.get(code, frozenset())
    return frozenset(other for other, scripts in LANGUAGE_SCRIPTS.items() if scripts & own)

"""length_ratio: an answer far shorter or longer than a translation into its language would be."""

from __future__ import annotations

import re

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.qa.flags import LENGTH_RATIO, Flag

# Text is measured in words, not characters: a Chinese answer keeps English terms and codes
# ("YYYY-MM-DD HH:MM") that are as long in it as in the source, so a character count lets a cut
# answer with one such term pass and flags a full one without. A word is a run of letters or digits
# in a script that writes words apart; in one that does not, each letter is a share of a word.
_UNSPACED = {
    "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9d\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff": 0.55,  # Han, kana
    # Thai, Lao, Burmese, Khmer, Tibetan
    "\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff\u0f00-\u0fff": 0.3,
}
_UNSPACED_CHAR = [(re.compile(f"[{chars}]"), weight) for chars, weight in _UNSPACED.items()]
# What ends a word: white space, punctuation and symbols (ASCII, Latin-1, general, CJK, full-width).
_BREAK = (
    r"\s!-/:-@\[-`{-~\u00a0-\u00bf\u00d7\u00f7"
    r"\u2000-\u206f\u2190-\u2bff\u3000-\u303f\uff01-\uff0f\uff1a-\uff20"
)
_SPACED_WORD = re.compile(f"[^{_BREAK}{''.join(_UNSPACED)}]+")

# Words a language takes for what English says in one: the median over the human translations of
# Weblate 2026.10.1's own interface (its django.mo per language, the prose of msgids of 30 characters
# and 5 words or more: 85 (tl) to 2,153 pairs each); Malay and Cantonese take their relative's (too
# few pairs of their own), the rest 1.0. Only the ratio of two of them is used, against wide bounds
# (qa_ratio_low, qa_ratio_high).
DENSITY: dict[str, float] = {
    "ta": 0.73,
    "ko": 0.75,
    **dict.fromkeys(("tr", "kk"), 0.8),
    "he": 0.83,
    **dict.fromkeys(("cs", "ru"), 0.89),
    **dict.fromkeys(("zh", "ar"), 0.9),
    **dict.fromkeys(("id", "ms", "uk"), 0.91),
    **dict.fromkeys(("zh-Hant", "yue", "pl"), 0.92),
    **dict.fromkeys(("de", "nl"), 1.0),
    "it": 1.1,
    **dict.fromkeys(("pt", "es"), 1.14),
    "tl": 1.19,
    "fa": 1.22,
    "fr": 1.23,
    **dict.fromkeys(("vi", "th"), 1.5),
    "ja": 1.52,
    "km": 1.8,
}


def length_in_words(text: str) -> float:
    """The text's length in words (a Han, kana, Thai, Khmer, Burmese or Tibetan letter is a share)."""
    count = float(len(_SPACED_WORD.findall(text)))
    for pattern, weight in _UNSPACED_CHAR:
        count += weight * len(pattern.findall(text))
    return count


def size(text: str) -> int:
    """Characters but white space."""
    return len("".join(text.split()))


def length_ratio(source: str, output: str, pair: tuple[str, str], cfg: QaSettings) -> Flag | None:
    """Outside qa_ratio_low to qa_ratio_high times the expected length, for a source long enough."""
    if len(source) < cfg.qa_ratio_min_chars or size(source) < cfg.qa_ratio_min_chars:
        return None  # the second is shorter still: asked only of a text long enough for the first
    source_words = length_in_words(source)
    if source_words < cfg.qa_ratio_min_words:
        return None
    expected = source_words * DENSITY.get(pair[1], 1.0) / DENSITY.get(pair[0], 1.0)
    output_words = length_in_words(output)
    ratio = output_words / expected
    if cfg.qa_ratio_low <= ratio <= cfg.qa_ratio_high:
        return None
    return Flag(
        LENGTH_RATIO,
        f"the answer is {output_words:.0f} words for a {source_words:.0f}-word source: {ratio:.2f} "
        f"times the length expected for {pair[0]} to {pair[1]}",
    )

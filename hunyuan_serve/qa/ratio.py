"""length_ratio: an answer far shorter or longer than a translation into its language would be."""

from __future__ import annotations

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.qa.flags import LENGTH_RATIO, Flag

# Characters (spaces out) a language takes for what English says in one, from the usual lengths of UI
# and document translations: Chinese writes a word in one or two characters, German's words are long.
# Chinese is 0.45: the median of the 920 human en -> zh_CN WebUI strings of 40 characters or more
# (bench/data), whose translators keep English terms in brackets; plain prose runs nearer 0.3.
# Only the ratio of two of them is used, against wide bounds (qa_ratio_low, qa_ratio_high).
DENSITY = {
    **dict.fromkeys(("zh", "zh-Hant", "yue"), 0.45),
    "ja": 0.55,
    "ko": 0.6,
    "he": 0.8,
    **dict.fromkeys(("ar", "fa", "ur", "th"), 0.9),
    **dict.fromkeys(("en", "cs", "tr", "hi", "mr", "bn", "gu"), 1.0),
    **dict.fromkeys(("pt", "it", "nl", "ru", "uk", "pl", "te", "km", "bo", "kk", "mn", "ug"), 1.1),
    **dict.fromkeys(("de", "fr", "es", "vi", "ms", "id"), 1.15),
    **dict.fromkeys(("tl", "my"), 1.2),
    "ta": 1.25,
}


def size(text: str) -> int:
    """Characters but white space."""
    return len("".join(text.split()))


def length_ratio(source: str, output: str, pair: tuple[str, str], cfg: QaSettings) -> Flag | None:
    """Outside qa_ratio_low to qa_ratio_high times the expected length, for a source long enough."""
    if len(source) < cfg.qa_ratio_min_chars:
        return None  # shorter still without its spaces
    source_size = size(source)
    if source_size < cfg.qa_ratio_min_chars:
        return None
    expected = source_size * DENSITY.get(pair[1], 1.0) / DENSITY.get(pair[0], 1.0)
    ratio = size(output) / expected
    if cfg.qa_ratio_low <= ratio <= cfg.qa_ratio_high:
        return None
    return Flag(
        LENGTH_RATIO,
        f"the answer is {size(output)} characters for a {source_size}-character source: {ratio:.2f} "
        f"times the length expected for {pair[0]} to {pair[1]}",
    )

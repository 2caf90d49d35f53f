"""echo: the source sent back as its translation, for two languages that are not close relatives."""

from __future__ import annotations

import functools
import re

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.qa import scripts
from hunyuan_serve.qa.flags import ECHO, Flag

_DENSE = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_DENSE_CHAR = re.compile(f"[{_DENSE}]")
# A word: each Han, kana or Hangul character, or a run of other letters with inner apostrophes or
# hyphens. The run stops at a dense character, so a word that mixes scripts ("将A设置为") is 将, A, 设,
# 置, 为: keeping only its Han made "将A…将B…将C…将D…" read as a loop of 将设置为.
_LETTERS = rf"[^\W\d_{_DENSE}]+"
_WORD = re.compile(rf"[{_DENSE}]|{_LETTERS}(?:['’-]{_LETTERS})*")
# The loop check's units: words and numbers, so "插槽1、插槽2、插槽3、插槽4" is no loop of 插槽.
_WORD_OR_NUMBER = re.compile(rf"{_WORD.pattern}|\d+")


@functools.lru_cache(maxsize=64)
def words(prose: str) -> tuple[str, ...]:
    """The text's words, lowercased. Kept for the few texts just read: the echo, loop and language
    checks of one answer each ask for the same two."""
    return tuple(_WORD.findall(prose.lower()))


@functools.lru_cache(maxsize=64)
def units(prose: str) -> tuple[str, ...]:
    """The text's words and numbers, lowercased: what a loop repeats."""
    return tuple(_WORD_OR_NUMBER.findall(prose.lower()))


def _ordinary(word: str) -> bool:
    """A word a translation changes: not an acronym (API, NN), not code or a brand (WebUI, iPhone)."""
    if len(word) < 2 and not _DENSE_CHAR.match(word):
        return False
    rest = word[1:]
    return rest == rest.lower()


def _least_words(prose_output: str, pair: tuple[str, str], cfg: QaSettings) -> int:
    """The ordinary words a source needs before its echo is judged: fewer where the target writes in
    other scripts than the source and the answer has no letter in them (English sent back as Chinese
    is no translation, while English kept in French may be a name)."""
    own = scripts.LANGUAGE_SCRIPTS.get(pair[1], frozenset())
    if not own or own & scripts.LANGUAGE_SCRIPTS.get(pair[0], frozenset()):
        return cfg.qa_echo_min_words
    counts = scripts.letters(prose_output)
    if any(counts[script] for script in own):
        return cfg.qa_echo_min_words
    return min(cfg.qa_echo_min_words, cfg.qa_echo_min_words_other_script)


def echo(prose_source: str, prose_output: str, pair: tuple[str, str], cfg: QaSettings) -> Flag | None:
    """The answer is (nearly) the source: most of the source's words are in it, and most of its words
    come from the source. Not judged for close languages (zh and zh-Hant) or a source of few ordinary
    words (a name, a code, a number may rightly stay as it is)."""
    if pair[1] in scripts.relatives(pair[0]):
        return None
    ours, theirs = words(prose_source), words(prose_output)
    if not theirs or not ours:
        return None
    ours_set, theirs_set = set(ours), set(theirs)
    borrowed = sum(word in ours_set for word in theirs) / len(theirs)
    if borrowed < cfg.qa_echo_similarity:
        return None  # most answers: their own words (asked first, as it is the cheaper test)
    kept = sum(word in theirs_set for word in ours) / len(ours)
    ordinary = sum(_ordinary(word) for word in _WORD.findall(prose_source))
    if kept < cfg.qa_echo_similarity or ordinary < _least_words(prose_output, pair, cfg):
        return None
    what = "the source's words" if kept == borrowed == 1 else "nearly the source's words"
    return Flag(ECHO, f"the answer is {what}: {round(borrowed * 100)}% of its words are in the source")

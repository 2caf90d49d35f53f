"""loop: one word or phrase repeated over and over, or a list item twice, more than the source repeats."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.qa.echo import units
from hunyuan_serve.qa.flags import LOOP, Flag

# A list item or a sentence ends at a comma, semicolon, enumeration comma, sentence end or line break
# (a "." only before a space or the end, so 0.5 and a.b stay whole).
_ITEM_END = re.compile(r"[,;，；、。!?！？\n]|\.(?=\s|$)")
_ITEM_TRIM = " \t\r\"'“”‘’()（）[]【】「」:：…"


def longest_repeat(units: Sequence[str], max_n: int, at_least: int = 2) -> tuple[int, tuple[str, ...]]:
    """The most times in a row one phrase of 1 to max_n units occurs, and that phrase; (1, ()) when no
    unit occurs at_least times, since no phrase can then repeat that often.

    A phrase of n units repeated k times is a run of (k - 1) * n units each equal to the unit n before
    it: one pass per n, so the cost is len(units) * max_n comparisons.
    """
    best, phrase = 1, tuple[str, ...]()
    if not units or Counter(units).most_common(1)[0][1] < at_least:
        return best, phrase  # most answers: counted in C, no pass over them
    for n in range(1, max_n + 1):
        run = 0
        for index in range(n, len(units)):
            run = run + 1 if units[index] == units[index - n] else 0
            times = run // n + 1
            if times > best:
                best, phrase = times, tuple(units[index - n + 1 : index + 1])
    return best, phrase


def repeated_item(prose: str, times: int) -> str | None:
    """The first list item or sentence (text between commas, enumeration commas, semicolons, sentence
    ends or line breaks) that comes `times` times in a row, compared without case; None when none."""
    if not _ITEM_END.search(prose):
        return None  # one item: nothing to repeat (most short answers)
    items = [item.strip(_ITEM_TRIM).lower() for item in _ITEM_END.split(prose)]
    items = [item for item in items if item]  # "a, , b" and "?!" leave empty items: not items
    run = 1
    for index in range(1, len(items)):
        run = run + 1 if items[index] == items[index - 1] else 1
        if run >= times and any(char.isalpha() for char in items[index]):
            return items[index]
    return None


def loop(prose_source: str | None, prose_output: str, cfg: QaSettings) -> Flag | None:
    """The answer repeats a phrase qa_loop_repeats times or more in a row, beyond the source's own; or,
    for a source that repeats nothing back to back, a list item qa_loop_item_repeats times in a row
    ("最后, 最终, 封锁, 封锁"). prose_source None: a prompt as written, no source to compare with, so
    only the first."""
    times, phrase = longest_repeat(units(prose_output), cfg.qa_loop_max_ngram, cfg.qa_loop_repeats)
    if times >= cfg.qa_loop_repeats:
        source_times, _ = longest_repeat(units(prose_source or ""), cfg.qa_loop_max_ngram)
        if times < source_times + cfg.qa_loop_repeats - 1:
            return None  # the source repeats as much ("ha ha ha ha"): so may its translation
        shown = " ".join(phrase)[:40]
        return Flag(LOOP, f"'{shown}' repeats {times} times in a row")
    if prose_source is None:
        return None
    item = repeated_item(prose_output, cfg.qa_loop_item_repeats)
    # Any repeat in the source ("Lock, lock!", "very very", "谢谢") may rightly come back as one.
    if item is None or longest_repeat(units(prose_source), cfg.qa_loop_max_ngram)[0] > 1:
        return None
    times = cfg.qa_loop_item_repeats
    return Flag(LOOP, f"'{item[:40]}' comes {times} times in a row, a list item the source does not repeat")

"""loop: one word or phrase repeated over and over, more than the source repeats anything."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.qa.echo import words
from hunyuan_serve.qa.flags import LOOP, Flag


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


def loop(prose_source: str, prose_output: str, cfg: QaSettings) -> Flag | None:
    """The answer repeats a phrase qa_loop_repeats times or more in a row, beyond the source's own."""
    output_units = words(prose_output)
    times, phrase = longest_repeat(output_units, cfg.qa_loop_max_ngram, cfg.qa_loop_repeats)
    if times < cfg.qa_loop_repeats:
        return None
    source_times, _ = longest_repeat(words(prose_source), cfg.qa_loop_max_ngram)
    if times < source_times + cfg.qa_loop_repeats - 1:
        return None  # the source repeats as much ("ha ha ha ha"): so may its translation
    shown = " ".join(phrase)[:40]
    return Flag(LOOP, f"'{shown}' repeats {times} times in a row")

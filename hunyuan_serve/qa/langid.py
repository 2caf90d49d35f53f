"""wrong_language: an answer in another script than the target's, or surely in another language."""

from __future__ import annotations

from collections import Counter

from hunyuan_serve import detect
from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.languages import find_language
from hunyuan_serve.qa import scripts
from hunyuan_serve.qa.echo import words
from hunyuan_serve.qa.flags import WRONG_LANGUAGE, Flag

_TOP = 3  # the detector's likeliest labels read: the first of ours among them is what it is sure of


def _judged(best: str, target: str, counts: Counter[str], confidence: float, cfg: QaSettings) -> bool:
    """Whether the detector's other language stands: sure, not a close relative, written in the target's
    script (an English term in a Chinese answer is the script check's to weigh, and it passed), and in
    every script it needs present (Han alone reads as Japanese to the detector, but has no kana)."""
    if best in scripts.relatives(target) or confidence < cfg.qa_langid_confidence:
        return False
    needs = scripts.LANGUAGE_SCRIPTS.get(best, frozenset())
    return bool(needs & scripts.LANGUAGE_SCRIPTS[target]) and _present(best, counts)


def _present(code: str, counts: Counter[str]) -> bool:
    """Whether the text has letters of every script `code` needs but Han (which Japanese and Korean
    text may lack): Japanese needs kana, Korean Hangul."""
    needs = scripts.LANGUAGE_SCRIPTS.get(code, frozenset())
    return all(counts[script] for script in needs - {scripts.HAN} or needs)


def wrong_language(output: str, target: str, cfg: QaSettings, prose: str) -> Flag | None:
    """The answer's script first (cheap and sure); within the target's script, the detector's word
    where it is sure. Too few letters, or a script that only the target writes in: not judged further.

    prose: the answer without its URLs, placeholders, tags and code (what the caller already made).
    """
    counts = scripts.letters(prose)
    total = sum(counts.values())
    if total < cfg.qa_langid_min_letters or target not in scripts.LANGUAGE_SCRIPTS:
        return None
    if len(words(prose)) < cfg.qa_langid_min_words:
        return None  # one or two long words: a name or an identifier (Colorprimaryborderhover)
    own = scripts.LANGUAGE_SCRIPTS[target]
    share = sum(counts[script] for script in own) / total
    name = find_language(target).name
    if share < cfg.qa_script_min_share:
        main, _ = counts.most_common(1)[0]
        return Flag(
            WRONG_LANGUAGE,
            f"{name} is written in {' or '.join(sorted(own))}; {round(share * 100)}% of the answer's "
            f"letters are, most are {main}",
        )
    others = [code for code in scripts.sharing(target) - scripts.relatives(target) if _present(code, counts)]
    if not others:
        return None  # no other language of this script could be told from what is there: not guessed
    found = detect.candidates(prose, cfg.qa_max_chars, k=_TOP)
    if not found or not _judged(found[0].language.code, target, counts, found[0].confidence, cfg):
        return None
    best = found[0]
    return Flag(
        WRONG_LANGUAGE,
        f"the answer reads as {best.language.name} ({round(best.confidence * 100)}% sure), not {name}",
    )

"""Completeness: lines, paragraphs and sentences counted in source and answer; what must come back kept."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.qa import tokens
from hunyuan_serve.qa.flags import LINES, MARKUP, NUMBERS, PARAGRAPHS, PLACEHOLDERS, SENTENCES, URLS, Flag

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
# A sentence ends at . ! ? (a space or the end after it) or at their full-width forms, which need none.
# A line break ends one too: a Chinese answer often breaks lines where its source put full stops.
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)|[。！？]+|[।॥۔؟]+|\n")
_SHOWN = 3  # missing items named in a detail; the rest are counted


def lines(text: str) -> int:
    """Lines with text; an indented line after one with text continues it (prose wrapped in code)."""
    count, previous = 0, ""
    for line in text.splitlines():
        if line.strip() and not (previous.strip() and line[:1].isspace()):
            count += 1
        previous = line
    return count


def paragraphs(text: str) -> int:
    return sum(1 for part in _PARAGRAPH_BREAK.split(text.strip()) if part.strip())


def sentences(prose: str) -> int:
    """Sentences of a text's words (URLs and the like already out: their dots end nothing)."""
    return sum(1 for part in _SENTENCE_END.split(prose) if any(char.isalnum() for char in part))


def _counted(name: str, what: str, source: int, output: int) -> Flag | None:
    if output >= source:
        return None
    return Flag(name, f"{source} {what} in the source, {output} in the answer")


def structure(source: str, output: str, prose_source: str, prose_output: str, cfg: QaSettings) -> list[Flag]:
    """Lines and paragraphs: none lost (more may come back: a wrapped line); sentences, for a source of
    at least qa_sentences_min: no fewer than qa_sentences_min_share of them (translators merge a few),
    and no more than qa_sentences_max_lost lost (46 of 50 is a high share, and four sentences)."""
    found = []
    if "\n" in source:  # else one line and one paragraph, which any answer has
        source_lines = lines(source)
        if source_lines > 1:
            found.append(_counted(LINES, "lines", source_lines, lines(output)))
        source_paragraphs = paragraphs(source)
        if source_paragraphs > 1:
            found.append(_counted(PARAGRAPHS, "paragraphs", source_paragraphs, paragraphs(output)))
    if len(_SENTENCE_END.findall(prose_source)) + 1 < cfg.qa_sentences_min:
        return [flag for flag in found if flag is not None]  # too few sentences to compare
    source_sentences = sentences(prose_source)
    if source_sentences >= cfg.qa_sentences_min:
        output_sentences = sentences(prose_output)
        lost = source_sentences - output_sentences
        if (
            output_sentences < source_sentences * cfg.qa_sentences_min_share
            or lost > cfg.qa_sentences_max_lost
        ):
            found.append(_counted(SENTENCES, "sentences", source_sentences, output_sentences))
    return [flag for flag in found if flag is not None]


# Numbers are found by tokens.numbers_missing: a source's own numbers, against any of the answer's.
_KEPT: tuple[tuple[str, str, Callable[[str], Counter[str]]], ...] = (
    (NUMBERS, "number", tokens.numbers),
    (URLS, "URL", tokens.urls),
    (PLACEHOLDERS, "placeholder", tokens.placeholders),
    (MARKUP, "tag", tokens.tags),
)


def kept(source: str, output: str) -> list[Flag]:
    """Every number, URL, placeholder and tag of the source comes back (as often as in the source);
    code spans holding code (`a_b`, `x.py`) count as markup."""
    found = []
    holds = tokens.might_hold(source)
    for name, what, find in _KEPT:
        if not holds[name]:
            continue
        if name == NUMBERS:
            lost = tokens.numbers_missing(source, output)
        else:
            lost = tokens.missing(find(source), find(output))
        if name == MARKUP:
            lost += tokens.code_missing(source, output)
        if lost:
            more = f" and {len(lost) - _SHOWN} more" if len(lost) > _SHOWN else ""
            shown = ", ".join(lost[:_SHOWN]) + more
            plural = "s" if len(lost) > 1 else ""
            found.append(Flag(name, f"{what}{plural} of the source missing from the answer: {shown}"))
    return found

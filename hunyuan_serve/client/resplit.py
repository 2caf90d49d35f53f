"""A long text whose answer lost lines, sentences or paragraphs: cut in two, each half sent again."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from hunyuan_serve.client.placeholders import has_words
from hunyuan_serve.client.wire import QaFlag, TranslateError, Translation

# The service's completeness checks: an answer failing one of them has dropped part of its text.
COMPLETENESS = frozenset({"lines", "sentences", "paragraphs"})
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_LINE_BREAK = re.compile(r"[ \t]*\n\s*")

Send = Callable[[list[str]], Awaitable[list[Translation]]]  # one batch request, all else bound


def incomplete(answer: Translation) -> bool:
    """Whether the answer failed one of the completeness checks."""
    return any(flag.check in COMPLETENESS for flag in answer.qa or ())


def own_checks(answer: Translation) -> Translation:
    """The answer with the client's own line count as its checks, when the service sent none (it
    predates QA): a line lost from a multi-line text is then still caught, and the text split again."""
    if answer.qa is not None:
        return answer
    lines_in, lines_out = answer.text.strip().count("\n") + 1, answer.result.strip().count("\n") + 1
    if lines_in == lines_out:
        return replace(answer, qa=())
    return replace(answer, qa=(QaFlag("lines", f"{lines_in} lines in, {lines_out} out (client's count)"),))


def halves(text: str, language: str | None) -> tuple[str, str, str] | None:
    """(left, separator, right): text cut at its coarsest boundary (paragraph, else line, else sentence)
    nearest its middle, the whitespace at the cut kept apart; None for a single sentence."""
    for pattern in (_PARAGRAPH_BREAK, _LINE_BREAK):
        cuts = [(m.start(), m.end()) for m in pattern.finditer(text) if m.start() > 0 and m.end() < len(text)]
        if cuts:
            return _cut_nearest(text, cuts)
    from hunyuan_serve.client.formats.markdown import sentence_segmenter, split_sentences

    sentences = split_sentences(sentence_segmenter(language or "en"), text)
    cuts, at = [], 0
    for sentence in sentences[:-1]:
        at += len(sentence)
        start = len(text[:at].rstrip())
        cuts.append((start, at))
    cuts = [(a, b) for a, b in cuts if a > 0 and b < len(text)]
    return _cut_nearest(text, cuts) if cuts else None


def _cut_nearest(text: str, cuts: Sequence[tuple[int, int]]) -> tuple[str, str, str]:
    start, end = min(cuts, key=lambda cut: abs(cut[0] + cut[1] - len(text)))
    return text[:start], text[start:end], text[end:]


async def complete(send: Send, answer: Translation, language: str | None) -> tuple[Translation, int]:
    """The answer, or, when it failed completeness, its text's halves translated again (each in turn
    split while it fails) and joined with the source's own separators; and the requests this sent.

    Never shorter by silence: a piece that cannot be split further keeps its answer and its flags.
    """
    if not incomplete(answer):
        return answer, 0
    cut = halves(answer.text, language)
    if cut is None:
        return answer, 0
    left, separator, right = cut
    pieces = [piece for piece in (left, right) if has_words(piece)]
    try:
        got = await send(pieces)
    except TranslateError:
        return answer, 1
    if len(got) != len(pieces):
        return answer, 1
    done = await asyncio.gather(*(complete(send, one, language) for one in got))
    answers = iter(done)
    # A piece without words (a line of symbols) was not sent: it stays as the source has it.
    out = [next(answers)[0] if has_words(piece) else None for piece in (left, right)]
    result = separator.join(
        piece if t is None else t.result.strip() for piece, t in zip((left, right), out, strict=True)
    )
    flags = tuple(flag for t in out if t is not None for flag in t.qa or ())
    return replace(answer, result=result, qa=flags), 1 + sum(sent for _, sent in done)

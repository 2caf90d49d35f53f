"""A long text whose answer lost lines, sentences or paragraphs: cut in two, each half sent again."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from hunyuan_serve.localization.answers import QaFlag, TranslateError, Translation
from hunyuan_serve.text.placeholders import has_words
from hunyuan_serve.text.split import coarsest_cuts

# The service's completeness checks: an answer failing one of them has dropped part of its text.
COMPLETENESS = frozenset({"lines", "sentences", "paragraphs"})

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


def halves(text: str) -> tuple[str, str, str] | None:
    """(left, separator, right): text cut at its coarsest boundary (paragraph, else line, else sentence)
    nearest its middle, the whitespace at the cut kept apart; None for a single sentence. The boundaries
    are the replica's own (text/split.py), which cuts a long text the same way before translating it."""
    cuts = coarsest_cuts(text)
    return _cut_nearest(text, cuts) if cuts else None


def _cut_nearest(text: str, cuts: Sequence[tuple[int, int]]) -> tuple[str, str, str]:
    start, end = min(cuts, key=lambda cut: abs(cut[0] + cut[1] - len(text)))
    return text[:start], text[start:end], text[end:]


async def complete(send: Send, answer: Translation) -> tuple[Translation, int]:
    """The answer, or, when it failed completeness, its text's halves translated again (each in turn
    split while it fails) and joined with the source's own separators; and the requests this sent.

    Never shorter by silence: a piece that cannot be split further keeps its answer and its flags.
    """
    if not incomplete(answer):
        return answer, 0
    cut = halves(answer.text)
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
    done = await asyncio.gather(*(complete(send, one) for one in got))
    answers = iter(done)
    # A piece without words (a line of symbols) was not sent: it stays as the source has it.
    out = [next(answers)[0] if has_words(piece) else None for piece in (left, right)]
    result = separator.join(
        piece if t is None else t.result.strip() for piece, t in zip((left, right), out, strict=True)
    )
    flags = tuple(flag for t in out if t is not None for flag in t.qa or ())
    return replace(answer, result=result, qa=flags), 1 + sum(sent for _, sent in done)

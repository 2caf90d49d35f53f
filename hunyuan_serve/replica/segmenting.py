"""Long texts in the translation core: cut into segments under a token target, sent as one batch, joined."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass

from hunyuan_serve.families import segment_tokens
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.qa import completeness
from hunyuan_serve.qa.flags import LINES, Flag
from hunyuan_serve.replica.admission.priority import Caller
from hunyuan_serve.replica.engine.interface import Delta, Engine, Generation
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.outcome import Outcome
from hunyuan_serve.replica.review import Verdicts, per_text
from hunyuan_serve.replica.schema import TranslateRequest
from hunyuan_serve.text.placeholders import has_words
from hunyuan_serve.text.split import UNSPACED, Measure, Split, split_steps

# The core's translation of a request's texts (Translator._translate).
Core = Callable[[TranslateRequest, Caller], Awaitable[Outcome]]


class _Step(enum.Enum):
    PENDING = "pending"  # a step of the cutting that found nothing yet


# How the core names a text of a batch in a refusal (service.py _check_budget).
_UNIT = re.compile(r"texts\[(\d+)\]")


@dataclass(frozen=True)
class Segmented:
    """A request whose long texts are cut: the request of its units (each text not cut is one unit, as
    sent), and per text its split (None: not cut) with each piece's unit (None: no words, kept as is)."""

    texts: tuple[str, ...]  # the request's own
    request: TranslateRequest
    splits: tuple[Split | None, ...]
    units: tuple[tuple[int | None, ...], ...]
    batch: bool  # the request's own (its units are always a batch)

    async def translated(self, run: Core, caller: Caller) -> Outcome:
        """The units through the core (run), joined into the texts' outcome."""
        with self.naming():
            return self.joined(await run(self.request, caller))

    @contextlib.contextmanager
    def naming(self) -> Iterator[None]:
        """A refusal of one unit (a segment over the token budget: code or a URL no cut may fall in)
        names the caller's text, not the unit's index among the segments."""
        try:
            yield
        except ApiError as err:
            match = _UNIT.match(err.message)
            if match is None:
                raise
            index = next(n for n, each in enumerate(self.units) if int(match.group(1)) in each)
            where = f"texts[{index}]" if self.batch else "text"
            where = f"a segment of {where}" if self.splits[index] is not None else where
            raise ApiError(err.status, err.code, where + err.message[match.end() :], err.headers) from None

    def joined(self, outcome: Outcome) -> Outcome:
        """The units' outcome as the texts': each cut text's answers joined with its source's gaps, its
        flags those of its units plus a lost line or segment of the whole (the completeness check)."""
        spaced = self.request.target.code.split("-")[0] not in UNSPACED
        texts = dataclasses.replace(outcome, results=[], cached=[], format_lost=[], candidates=[])
        for piece_split, units in zip(self.splits, self.units, strict=True):
            sent = [unit for unit in units if unit is not None]
            texts.results.append(_join(piece_split, units, outcome.results, spaced))
            texts.cached.append(bool(sent) and all(outcome.cached[unit] for unit in sent))
            if outcome.format_lost:
                texts.format_lost.append(tuple(tag for unit in sent for tag in outcome.format_lost[unit]))
            if outcome.candidates:
                samples = range(len(outcome.candidates[sent[0]]) if sent else 0)
                each = [[one[k] for one in outcome.candidates] for k in samples]
                texts.candidates.append([_join(piece_split, units, answers, spaced) for answers in each])
        texts.verdicts = self._verdicts(outcome.verdicts, outcome.results, texts.results)
        return texts

    def _verdicts(self, units: Verdicts, answers: list[str], results: list[str]) -> Verdicts:
        """Each text's failed checks: its units' (every check once), and `lines` for a cut text that
        lost a line or a segment as a whole."""
        if not units.flags:  # the checks are off
            return units
        parts = [[unit for unit in each if unit is not None] for each in self.units]
        flags = per_text(parts, units.flags)
        for index, sent in enumerate(parts):
            if self.splits[index] is None or any(flag.check == LINES for flag in flags[index]):
                continue
            answered = sum(1 for unit in sent if answers[unit].strip())
            lines_in, lines_out = completeness.lines(self.texts[index]), completeness.lines(results[index])
            if lines_out < lines_in or answered < len(sent):
                detail = f"{lines_in} lines in the source, {lines_out} in the answer; "
                flags[index].append(Flag(LINES, detail + f"{len(sent)} segments sent, {answered} answered"))
        return dataclasses.replace(units, flags=flags)


def _join(piece_split: Split | None, units: tuple[int | None, ...], answers: list[str], spaced: bool) -> str:
    if piece_split is None:
        return answers[units[0]] if units[0] is not None else ""
    pieces = [
        answers[unit] if unit is not None else piece
        for piece, unit in zip(piece_split.pieces, units, strict=True)
    ]
    return piece_split.join(pieces, spaced)


def segmented(engine: Engine, family: str, target: int | None, req: TranslateRequest) -> Segmented | None:
    """The request with each text over the target (None: the family's) cut, measured by the engine's
    tokenizer; None when no text is. In one go: for a stream's one text, before its first byte."""
    steps = _steps(engine, family, target, req)
    while (done := _next(steps)) is _Step.PENDING:
        pass
    return done


async def segmented_in_turns(
    engine: Engine, family: str, target: int | None, req: TranslateRequest
) -> Segmented | None:
    """segmented(), the event loop given a turn after each paragraph: cutting a 100,000-character text
    tokenizes it several times over (2.4 s on one core), which /health and other requests must not
    wait for."""
    steps = _steps(engine, family, target, req)
    while (done := _next(steps)) is _Step.PENDING:
        await asyncio.sleep(0)
    return done


def _next(steps: Generator[None, None, Segmented | None]) -> Segmented | _Step | None:
    """The next step: PENDING while there is more to cut, else what the cutting found."""
    try:
        next(steps)
    except StopIteration as done:
        return done.value
    return _Step.PENDING


def _steps(
    engine: Engine, family: str, target: int | None, req: TranslateRequest
) -> Generator[None, None, Segmented | None]:
    target = segment_tokens(family) if target is None else target
    if target <= 0:
        return None
    bare = engine.count_prompt_tokens(Prompt(text=""))  # what the tokenizer adds to any text
    return (
        yield from segment(req, target, lambda text: engine.count_prompt_tokens(Prompt(text=text)) - bare)
    )


def segment(req: TranslateRequest, target: int, measure: Measure) -> Generator[None, None, Segmented | None]:
    """The request with each text over target tokens cut (text/split.py), a step (None) after each
    paragraph; None when no text is cut, so a request of short texts goes to the core as it came."""
    splits: list[Split | None] = []
    for text in req.texts:
        # A token is at least one byte: a text of at most target bytes needs no tokenizer to pass.
        found = None
        for step in () if len(text.encode()) <= target else split_steps(text, target, measure):
            if step is None:
                yield None
            found = step
        splits.append(found if found is not None and len(found.pieces) > 1 else None)
    if not any(splits):
        return None
    cut = tuple(splits)
    texts: list[str] = []
    units: list[tuple[int | None, ...]] = []
    for text, each in zip(req.texts, cut, strict=True):
        pieces = (text,) if each is None else each.pieces
        mine: list[int | None] = []
        for piece in pieces:
            # A piece of only symbols or markup (a rule, a closing tag) is kept as it is, not sent.
            if each is not None and not has_words(piece):
                mine.append(None)
                continue
            mine.append(len(texts))
            texts.append(piece)
        units.append(tuple(mine))
    request = dataclasses.replace(req, texts=tuple(texts), batch=True)
    return Segmented(req.texts, request, cut, tuple(units), req.batch)


async def streamed(
    whole: Callable[[], Awaitable[Outcome]],
) -> AsyncGenerator[Delta, None]:
    """A cut text's stream: its segments translated as one batch, then the joined answer as one delta."""
    outcome = await whole()
    text = outcome.results[0]
    final = Generation(
        text, outcome.prompt_tokens, outcome.output_tokens, "stop", outcome.queue_s, outcome.engine_s
    )
    yield Delta(text)
    yield Delta("", final, cached=outcome.cached[0])

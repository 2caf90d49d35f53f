"""A long text cut into segments of at most a target size at its coarsest boundaries, and joined back."""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from hunyuan_serve.text.placeholders import VOID_ELEMENTS, find_placeholders

# A text's size: the engine's tokens on the replica; characters (len) or words in tests.
Measure = Callable[[str], int]
Span = tuple[int, int]

PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
LINE = re.compile(r"[ \t]*\n\s*")
# A sentence ends at . ! ? … (closing quotes and brackets kept with it) before a space, unless a lowercase
# Latin letter follows (e.g. i.e. vs.: an abbreviation); at CJK full stops, which need no space; at the
# danda, the Arabic and Urdu marks, Burmese, Ethiopic and Khmer stops. Thai writes no full stop: a space
# between two Thai letters ends a sentence or a clause there. The group named `gap` is what lies between.
SENTENCE = re.compile(
    r"[.!?…]+[\"'”’)\]»]*(?P<gap>\s+)(?![a-z])"
    r"|[。！？｡]+[”’」』）》\"')\]]*(?P<cjk>\s*)"
    r"|[।॥؟۔။።។]+[\"'”’)\]»]*(?P<mark>\s*)"
    r"|(?<=[\u0e01-\u0e5b])(?P<thai>[ \t]+)(?=[\u0e01-\u0e5b])"
)
SPACE = re.compile(r"\s+")
# Below paragraphs (split_steps cuts at every one), the coarsest first; True: a cut may not fall inside
# a tagged element (<b>...</b>) either. The sentence and space levels come twice: inside elements only
# where the text has no cut outside them.
_LEVELS: tuple[tuple[re.Pattern[str] | None, bool], ...] = (
    (LINE, False),
    (SENTENCE, True),
    (SPACE, True),
    (SENTENCE, False),
    (SPACE, False),
    (None, False),  # a hard cut, at a safe place (never inside a placeholder, a code block or a character)
)
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)")
# Target languages that put no space between sentences: an empty gap (a CJK full stop, a hard cut) stays
# empty in them and becomes a space in the others.
UNSPACED = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "yue", "wuu"})


@dataclass(frozen=True)
class Split:
    """A text as its pieces and the gaps around them: gaps[0] + pieces[0] + gaps[1] + ... + gaps[-1]."""

    pieces: tuple[str, ...]
    gaps: tuple[str, ...]

    def join(self, answers: Sequence[str], spaced: bool = False) -> str:
        """The answers (one per piece, stripped) between the source's own gaps; spaced: an empty gap
        between two answers becomes a space (a target that spaces its sentences)."""
        out = [self.gaps[0]]
        last = len(self.pieces) - 1
        for index, (answer, gap) in enumerate(zip(answers, self.gaps[1:], strict=True)):
            out += [answer.strip(), " " if spaced and not gap and index < last else gap]
        return "".join(out)


class _Guard:
    """Where no cut may fall: inside a placeholder or code block (hard), inside a tagged element (soft).

    Each kind is kept as sorted spans, overlapping ones merged, so one bisection answers a cut."""

    def __init__(self, hard: list[Span], soft: list[Span]) -> None:
        self._hard = _merged(hard)
        self._both = _merged(hard + soft)

    def allows(self, start: int, end: int, elements: bool) -> bool:
        spans = self._both if elements else self._hard
        if not spans[0]:
            return True
        # The last span starting before the cut's end is the only one that can hold it.
        index = bisect.bisect_left(spans[0], end if start < end else start) - 1
        return index < 0 or spans[1][index] <= start


def _merged(spans: list[Span]) -> tuple[list[int], list[int]]:
    """Starts and ends of the spans, sorted, overlapping ones merged (touching ones kept apart)."""
    starts: list[int] = []
    ends: list[int] = []
    for a, b in sorted(spans):
        if starts and a < ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return starts, ends


def split(text: str, target: int, measure: Measure = len) -> Split:
    """text cut into pieces of at most target (by measure) at paragraph, else line, else sentence, else
    space boundaries, else a hard cut; a piece is never cut inside a placeholder, a code block or a tag
    (nor an element while the text has another cut), so a piece that cannot be cut may exceed target.
    Lines or sentences that fit together are one piece; paragraphs never are (each comes back as its
    own, whatever a model does to a blank line). Whitespace around a piece goes to its gaps."""
    done = None
    for step in split_steps(text, target, measure):
        done = step
    assert done is not None  # the last step is the split
    return done


def split_steps(text: str, target: int, measure: Measure = len) -> Iterator[Split | None]:
    """split() a paragraph at a time: None after each paragraph is cut (a caller serving others may
    give them a turn: a 100,000-character text takes seconds of tokenizing), the Split last."""
    start, end = _stripped(text, 0, len(text))
    if start == end:
        yield Split((), (text,))
        return
    spans = [(start, end)]
    if measure(text[start:end]) > target:
        guard = _guard(text)
        gaps = [gap for gap in _gaps(PARAGRAPH, text, start, end) if guard.allows(*gap, elements=False)]
        spans = []
        for a, b in _between(start, end, gaps):
            spans += [(a, b)] if measure(text[a:b]) <= target else _cut(text, a, b, 0, target, measure, guard)
            yield None
        spans = [span for span in (_stripped(text, a, b) for a, b in spans) if span[0] < span[1]]
    gaps_between = [text[left[1] : right[0]] for left, right in itertools.pairwise(spans)]
    pieces = tuple(text[a:b] for a, b in spans)
    yield Split(pieces, (text[: spans[0][0]], *gaps_between, text[spans[-1][1] :]))


def _between(start: int, end: int, gaps: Sequence[Span]) -> list[Span]:
    """The spans of start..end that the gaps leave."""
    edges = [start, *(edge for gap in gaps for edge in gap), end]
    return list(zip(edges[::2], edges[1::2], strict=True))


def coarsest_cuts(text: str) -> list[Span]:
    """The gaps (start, end) of the coarsest boundaries text has inside it: paragraph, else line, else
    sentence; none inside a placeholder, a code block or a tagged element."""
    guard = _guard(text)
    for pattern in (PARAGRAPH, LINE, SENTENCE):
        found = [gap for gap in _gaps(pattern, text, 0, len(text)) if guard.allows(*gap, elements=True)]
        if found:
            return found
    return []


def _cut(
    text: str, start: int, end: int, level: int, target: int, measure: Measure, guard: _Guard
) -> list[Span]:
    pattern, elements = _LEVELS[level]
    if pattern is None:
        return _hard(text, start, end, target, measure, guard)
    gaps = [gap for gap in _gaps(pattern, text, start, end) if guard.allows(*gap, elements=elements)]
    if not gaps:
        return _cut(text, start, end, level + 1, target, measure, guard)
    atoms = _between(start, end, gaps)
    pieces: list[Span] = []
    run: Span | None = None
    size = 0
    for (a, b), gap in zip(atoms, [(start, start), *gaps], strict=True):
        atom = measure(text[a:b])
        if atom > target:
            pieces += [run] if run else []
            run, size = None, 0
            pieces += _cut(text, a, b, level + 1, target, measure, guard)
            continue
        joined = size + measure(text[gap[0] : gap[1]]) + atom
        if run is not None and joined <= target:
            run, size = (run[0], b), joined
            continue
        pieces += [run] if run else []
        run, size = (a, b), atom
    return pieces + ([run] if run else [])


def _gaps(pattern: re.Pattern[str], text: str, start: int, end: int) -> list[Span]:
    """The boundaries of one kind strictly inside text[start:end], as the spans between two pieces."""
    found = []
    for match in pattern.finditer(text, start, end):
        named = [name for name, value in match.groupdict().items() if value is not None]
        a, b = match.span(named[0]) if named else match.span()
        if start < a and b < end:
            found.append((a, b))
    return found


def _hard(text: str, start: int, end: int, target: int, measure: Measure, guard: _Guard) -> list[Span]:
    """text[start:end] cut where no boundary is: each piece the longest prefix within target that ends
    at a safe place (else the shortest beyond it that does: a placeholder longer than target stays whole)."""
    pieces = []
    while start < end:
        # A token covers at most a few dozen characters: a window of target * 32 holds every candidate.
        hi = min(end, start + max(1, target) * 32)
        lo = start + 1
        while lo < hi:  # the longest prefix within target (a longer prefix never measures less)
            mid = (lo + hi + 1) // 2
            if measure(text[start:mid]) <= target:
                lo = mid
            else:
                hi = mid - 1
        cut = next((at for at in range(lo, start, -1) if _safe(text, at, end, guard)), None)
        if cut is None:
            cut = next(at for at in range(lo + 1, end + 1) if _safe(text, at, end, guard))
        pieces.append((start, cut))
        start = cut
    return pieces


def _safe(text: str, at: int, end: int, guard: _Guard) -> bool:
    """Whether a cut at `at` keeps every placeholder, code block and character whole: never before a
    combining mark or a joiner, nor between CR and LF or the halves of a joined pair."""
    if at >= end:
        return True
    if not guard.allows(at, at, elements=False):
        return False
    after, before = text[at], text[at - 1]
    if unicodedata.category(after).startswith("M") or after in "\u200d\u200c" or before in "\u200d":
        return False
    return not (before == "\r" and after == "\n")


def _stripped(text: str, start: int, end: int) -> Span:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _guard(text: str) -> _Guard:
    hard = [(each.start, each.end) for each in find_placeholders(text)]
    return _Guard(hard + _code_blocks(text), _elements(text))


def _code_blocks(text: str) -> list[Span]:
    """Fenced code blocks (``` or ~~~), from their opening line to their closing one (or the text's end)."""
    blocks, opened, fence, at = [], -1, "", 0
    for line in text.splitlines(keepends=True):
        match = _FENCE.match(line)
        if match and opened < 0:
            opened, fence = at, match.group(1)
        elif match and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            blocks.append((opened, at + len(line.rstrip("\r\n"))))
            opened = -1
        at += len(line)
    if opened >= 0:
        blocks.append((opened, len(text)))
    return blocks


def _elements(text: str) -> list[Span]:
    """Each tagged element (<b>...</b>), from its opening tag to its closing one; void and unclosed
    tags open nothing."""
    spans, opened = [], []
    for tag in find_placeholders(text):
        match = _TAG.match(tag.text) if tag.kind == "html" else None
        if match is None or tag.text.endswith("/>") or match.group(2).lower() in VOID_ELEMENTS:
            continue
        name = match.group(2).lower()
        if not match.group(1):
            opened.append((name, tag.start))
            continue
        for index in range(len(opened) - 1, -1, -1):
            if opened[index][0] == name:
                spans.append((opened[index][1], tag.end))
                del opened[index:]
                break
    return spans

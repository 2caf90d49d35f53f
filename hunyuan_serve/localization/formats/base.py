"""What every format module returns: a Document of segments and how to write translations back."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# rebuild(translations, failed): failed holds the indexes of segments whose translation was refused.
Rebuild = Callable[[Sequence[str], frozenset[int]], str]
# The same with flagged: the indexes of translations the service's checks found suspect, written in
# the format's own review state (gettext fuzzy, XLIFF's needs-review/initial, a catalog's needs_review).
ReviewRebuild = Callable[[Sequence[str], frozenset[int], frozenset[int]], str]
# The same with reviewed: the indexes of translations a person made (a translation memory's answers),
# whose entries leave the format's review state they were in (gettext's fuzzy), as msgmerge writes an
# exact match of its compendium.
SettleRebuild = Callable[[Sequence[str], frozenset[int], frozenset[int], frozenset[int]], str]


class FormatError(ValueError):
    """Input that cannot be read in the chosen format: the reason and, where known, the line."""

    def __init__(self, problem: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {problem}" if line else problem)
        self.problem = problem
        self.line = line


@dataclass(frozen=True)
class Options:
    """What a format needs to know besides the text: the target language, whether to redo translations."""

    target: str | None = None
    source: str | None = None
    overwrite: bool = False


@dataclass(frozen=True)
class Document:
    """A parsed input: its segments in order and how to rebuild it around new segment texts."""

    format: str
    segments: tuple[str, ...]
    labels: tuple[str, ...]  # where each segment lives, for reports (line number or key path)
    _rebuild: Rebuild
    # Per segment: the text the service gets as `context` (gettext msgctxt), or None.
    contexts: tuple[str | None, ...] = field(default=())
    # Per segment: whether it holds inline markup (Markdown emphasis, code, links; HTML tags) that a
    # family's formatted-translation prompt can carry (/translate's preserve_format).
    formatted: tuple[bool, ...] = field(default=())
    # The format's own validator of a rendered text (gettext: msgfmt --check): raises a FormatError.
    validate: Callable[[str], None] | None = None
    # Formats with a review state: the rebuild that writes a flagged translation in it, and its name.
    review: ReviewRebuild | None = None
    review_state: str = ""
    settle: SettleRebuild | None = None

    def render(
        self,
        translations: Sequence[str],
        failed: frozenset[int] = frozenset(),
        flagged: frozenset[int] = frozenset(),
        reviewed: frozenset[int] = frozenset(),
    ) -> str:
        """The document with each segment replaced by the matching entry of translations; the flagged
        ones in the format's review state, where it has one (else written as any translation); the
        reviewed ones (a person's) out of it, where the format keeps one on an entry."""
        expect_translations(self.segments, translations)
        if reviewed and self.settle is not None:
            return self.settle(translations, failed, flagged, reviewed)
        if flagged and self.review is not None:
            return self.review(translations, failed, flagged)
        return self._rebuild(translations, failed)

    def check(self, text: str) -> None:
        """Raise a FormatError where the rendered text fails its format's validator (where it has one)."""
        if self.validate is not None:
            self.validate(text)


def expect_translations(segments: Sequence[str], translations: Sequence[str]) -> None:
    """A ValueError unless there is one translation per segment."""
    if len(translations) != len(segments):
        raise ValueError(f"expected {len(segments)} translations, got {len(translations)}")


@dataclass(frozen=True)
class Edit:
    """Replace content[start:end] with text."""

    start: int
    end: int
    text: str


def splice(content: str, edits: Sequence[Edit]) -> str:
    """content with the edits applied; everything outside them is kept byte for byte."""
    out: list[str] = []
    pos = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        if edit.start < pos:
            raise ValueError(f"overlapping edits at offset {edit.start}")
        out.append(content[pos : edit.start])
        out.append(edit.text)
        pos = edit.end
    out.append(content[pos:])
    return "".join(out)


def line_of(content: str, offset: int) -> int:
    """1-based line number of a character offset."""
    return content.count("\n", 0, offset) + 1


_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def decode(data: bytes, fallback: str | None = None) -> tuple[str, str]:
    """(text, encoding to write it back with): a BOM decides, else UTF-8, else fallback.

    Line endings are left as they are (no universal-newline translation), so CRLF files stay CRLF.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data.decode(encoding), encoding
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as err:
        if fallback is None:
            raise FormatError(f"not UTF-8 text (byte {err.start})") from None
        return data.decode(fallback), fallback


def encode(text: str, encoding: str) -> bytes:
    """text in the input's encoding, its BOM included when it had one."""
    return text.encode(encoding)


def escape_markup(text: str) -> str:
    """A translation of XML content with tags: its tags and entities as they are, &, < and > in the
    text around them escaped (a stray '<' from the model would break the file)."""
    from xml.sax.saxutils import escape

    from hunyuan_serve.text.placeholders import find_placeholders

    out: list[str] = []
    pos = 0
    for ph in find_placeholders(text):
        if ph.kind in ("html", "entity"):
            out.append(escape(text[pos : ph.start]) + ph.text)
            pos = ph.end
    out.append(escape(text[pos:]))
    return "".join(out)


def markup_flags(segments: Sequence[str]) -> tuple[bool, ...]:
    """Per segment, whether it holds markup the formatted prompt carries (format_tags.wrap finds some)."""
    from hunyuan_serve.families.format_tags import wrap

    return tuple(bool(wrap(segment).markup) for segment in segments)

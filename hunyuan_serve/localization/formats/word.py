"""Word .docx (python-docx): each paragraph with text a segment, written back into the paragraph's runs."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hunyuan_serve.localization.formats.base import FormatError, Options, expect_translations


@dataclass(frozen=True)
class WordDocument:
    """A parsed .docx, read as a Document is (segments, labels), rendered as the file's bytes.

    Word has no review state: a flagged translation is written as any other (or skipped, by the CLI's
    --flagged skip); nothing validates the output beyond python-docx writing it.
    """

    segments: tuple[str, ...]
    labels: tuple[str, ...]
    _word: Any  # the python-docx Document, its paragraphs changed in place by render
    _paragraphs: tuple[Any, ...]
    format: str = "docx"
    contexts: tuple[str | None, ...] = field(default=())
    formatted: tuple[bool, ...] = field(default=())
    review: None = None
    review_state: str = ""

    def render(
        self,
        translations: Sequence[str],
        failed: frozenset[int] = frozenset(),
        flagged: frozenset[int] = frozenset(),
        reviewed: frozenset[int] = frozenset(),
    ) -> bytes:
        """The file with each paragraph's text replaced (a failed one kept as it was)."""
        del flagged, reviewed  # no review state: written as any translation
        expect_translations(self.segments, translations)
        for index, (paragraph, text) in enumerate(zip(self._paragraphs, translations, strict=True)):
            if index not in failed and text != paragraph.text:
                _set_text(paragraph, text)
        out = io.BytesIO()
        self._word.save(out)
        return out.getvalue()

    def check(self, data: bytes) -> None:
        """A .docx has no validator here: python-docx wrote it."""


def parse_docx(data: bytes, options: Options | None = None) -> WordDocument:
    """Each paragraph with text (the body's, and each table cell's) is a segment. Written back, a
    paragraph's text goes into its first run with text, the other runs emptied: the paragraph keeps
    its style and its first run's formatting (a bold word inside it does not survive: the model
    translates the sentence whole, so no word maps onto a run of its own)."""
    del options  # the target language is not written into a .docx
    import docx

    try:
        word = docx.Document(io.BytesIO(data))
    except Exception as err:  # PackageNotFoundError; a zip of something else: lxml's and zipfile's own
        raise FormatError(f"not a Word .docx file ({type(err).__name__})") from None
    paragraphs = tuple(p for p in _paragraphs(word) if p.text.strip())
    labels = tuple(f"paragraph {n}" for n in range(1, len(paragraphs) + 1))
    return WordDocument(tuple(p.text for p in paragraphs), labels, word, paragraphs)


def _paragraphs(word: Any) -> list[Any]:
    found: list[Any] = list(getattr(word, "paragraphs", []))
    for table in getattr(word, "tables", []):
        for row in table.rows:
            for cell in row.cells:
                found.extend(cell.paragraphs)
    # A merged cell is listed once per grid position: the same paragraph element, several objects.
    return list({id(getattr(p, "_p", p)): p for p in found}.values())


def _set_text(paragraph: Any, text: str) -> None:
    runs = [run for run in getattr(paragraph, "runs", []) if run.text]
    if not runs:
        paragraph.text = text
        return
    runs[0].text = text
    for run in runs[1:]:
        run.text = ""

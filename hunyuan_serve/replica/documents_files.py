"""An uploaded file as segments and back to bytes: the CLI's formats (client/formats), and .docx."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hunyuan_serve.client.formats import FormatError, Options, decode, encode, fallback_encoding, parse
from hunyuan_serve.replica.documents import DOCX

Render = Callable[[Sequence[str], frozenset[int]], bytes]


@dataclass(frozen=True)
class ParsedDocument:
    """What a job translates: its segments (with the CLI's labels, contexts and markup flags) and how
    the file is written back around their translations."""

    segments: tuple[str, ...]
    labels: tuple[str, ...]
    render: Render
    contexts: tuple[str | None, ...] = field(default=())
    formatted: tuple[bool, ...] = field(default=())


def read(data: bytes, filename: str, fmt: str, target: str, source: str | None) -> ParsedDocument:
    """The file read in its format; a FormatError names what is wrong with it (the job's error)."""
    if fmt == DOCX:
        return _read_docx(data)
    content, encoding = decode(data, fallback_encoding(filename, fmt))
    document = parse(content, fmt, Options(target=target, source=source))

    def render(translations: Sequence[str], failed: frozenset[int]) -> bytes:
        # The CLI's rule for a job's output too: one its format's validator (msgfmt --check for
        # gettext) refuses is never handed back; the FormatError fails the job, naming the problem.
        text = document.render(translations, failed)
        document.check(text)
        return encode(text, encoding)

    return ParsedDocument(document.segments, document.labels, render, document.contexts, document.formatted)


def _read_docx(data: bytes) -> ParsedDocument:
    """Each paragraph with text (the body's, and each table cell's) is a segment. Written back, a
    paragraph's text goes into its first run with text, the other runs emptied: the paragraph keeps
    its style and its first run's formatting (a bold word inside it does not survive: the model
    translates the sentence whole, so no word maps onto a run of its own)."""
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        word = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, KeyError, ValueError, OSError) as err:
        raise FormatError(f"not a Word .docx file ({type(err).__name__})") from None
    except Exception as err:  # a zip of something else: lxml and zipfile raise their own kinds
        raise FormatError(f"not a Word .docx file ({type(err).__name__})") from None
    paragraphs = [p for p in _paragraphs(word) if p.text.strip()]
    segments = tuple(p.text for p in paragraphs)
    labels = tuple(f"paragraph {n}" for n in range(1, len(paragraphs) + 1))

    def render(translations: Sequence[str], failed: frozenset[int]) -> bytes:
        for index, (paragraph, text) in enumerate(zip(paragraphs, translations, strict=True)):
            if index not in failed and text != paragraph.text:
                _set_text(paragraph, text)
        out = io.BytesIO()
        word.save(out)
        return out.getvalue()

    return ParsedDocument(segments, labels, render)


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

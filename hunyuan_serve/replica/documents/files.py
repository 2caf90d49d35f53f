"""An uploaded file as segments and back to bytes, in localization's formats, .docx included."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hunyuan_serve.localization.formats import Options, encode, read_file

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
    document, encoding = read_file(data, filename, fmt, Options(target=target, source=source))
    if not encoding:  # a binary format (.docx): its document renders the file's bytes itself
        return ParsedDocument(document.segments, document.labels, document.render)

    def render(translations: Sequence[str], failed: frozenset[int]) -> bytes:
        # The CLI's rule for a job's output too: one its format's validator (msgfmt --check for
        # gettext) refuses is never handed back; the FormatError fails the job, naming the problem.
        text = document.render(translations, failed)
        document.check(text)
        return encode(text, encoding)

    return ParsedDocument(document.segments, document.labels, render, document.contexts, document.formatted)

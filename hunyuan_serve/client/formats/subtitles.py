"""SubRip subtitles through the srt library's own grammar: cue text replaced in place, re-wrapped."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import srt

from hunyuan_serve.client.formats.base import Document, Edit, FormatError, Options, line_of, splice


def parse_srt(content: str, options: Options) -> Document:
    """Each cue's text (its lines joined by spaces) is a segment; numbers, timings and blank lines stay."""
    try:
        cues = list(srt.parse(content))
    except srt.SRTParseError as err:
        raise FormatError(
            f"not a subtitle cue: {err.unmatched_content[:60]!r}", line_of(content, err.expected_start)
        ) from None
    except ValueError as err:
        raise FormatError(f"bad timing: {err}") from None
    spans: list[tuple[int, int]] = []
    for match in srt.SRT_REGEX.finditer(content):  # the same grammar srt.parse read the cues with
        spans.append(match.span(5))
    if len(spans) != len(cues):
        raise FormatError(f"{len(cues)} cues parsed but {len(spans)} located")
    newline = "\r\n" if "\r\n" in content else "\n"
    originals = [content[start:end] for start, end in spans]
    segments = tuple(" ".join(text.splitlines()) for text in originals)
    labels = tuple(
        f"cue {cue.index} (line {line_of(content, start)})"
        for cue, (start, _) in zip(cues, spans, strict=True)
    )

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        edits = []
        for index, (translation, (start, end)) in enumerate(zip(translations, spans, strict=True)):
            if index in failed or translation == segments[index]:
                continue  # unchanged cues keep their own line breaks
            lines = max(1, len(originals[index].splitlines()))
            edits.append(Edit(start, end, newline.join(wrap(translation, lines))))
        return splice(content, edits)

    return Document("srt", segments, labels, rebuild)


def wrap(text: str, lines: int) -> list[str]:
    """text broken into at most `lines` lines of even length (words kept whole where they fit)."""
    flat = " ".join(text.split())
    if lines <= 1 or not flat:
        return [flat]
    width = max(1, -(-len(flat) // lines))
    # Text written without spaces (Chinese, Japanese) may break anywhere; a word may not.
    unspaced = " " not in flat and not flat.isascii()
    while True:
        wrapped = textwrap.wrap(flat, width=width, break_on_hyphens=False, break_long_words=unspaced)
        if len(wrapped) <= lines:
            return wrapped
        width += 1

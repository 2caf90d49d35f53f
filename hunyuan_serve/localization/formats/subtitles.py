"""SubRip (the srt library's grammar) and WebVTT subtitles: cue text replaced in place, re-wrapped."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import srt

from hunyuan_serve.localization.formats.base import Document, Edit, FormatError, Options, line_of, splice


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
    labels = [
        f"cue {cue.index} (line {line_of(content, start)})"
        for cue, (start, _) in zip(cues, spans, strict=True)
    ]
    return _cues("srt", content, spans, labels)


def parse_vtt(content: str, options: Options) -> Document:
    """WebVTT: each cue's text is a segment; the header, NOTE, STYLE and REGION blocks, cue identifiers,
    timings and settings stay. Blocks are read as the WebVTT spec cuts them: at blank lines."""
    if not content.startswith("WEBVTT") or content[6:7] not in ("", " ", "\t", "\r", "\n"):
        raise FormatError("a WebVTT file starts with the line WEBVTT", 1)
    spans: list[tuple[int, int]] = []
    labels: list[str] = []
    for number, (start, block) in enumerate(_blocks(content)):
        lines = block.splitlines()
        if number == 0 or lines[0].startswith(("NOTE", "STYLE", "REGION")):
            continue
        timing = next((i for i, line in enumerate(lines[:2]) if "-->" in line), None)
        if timing is None:
            raise FormatError(f"a cue without a timing line: {lines[0][:60]!r}", line_of(content, start))
        head = sum(len(line) for line in block.splitlines(keepends=True)[: timing + 1])
        text = block[head:].strip()
        if text and not text.startswith("{"):  # a "{...}" payload is a metadata cue's JSON, not words
            spans.append((start + head, start + len(block.rstrip("\r\n"))))
            labels.append(f"cue at line {line_of(content, start)}")
    return _cues("vtt", content, spans, labels)


def _blocks(content: str) -> list[tuple[int, str]]:
    """(offset, text) of each run of non-blank lines."""
    blocks: list[tuple[int, str]] = []
    start: int | None = None
    offset = 0
    for line in content.splitlines(keepends=True):
        if line.strip() and start is None:
            start = offset
        elif not line.strip() and start is not None:
            blocks.append((start, content[start:offset]))
            start = None
        offset += len(line)
    if start is not None:
        blocks.append((start, content[start:]))
    return blocks


def _cues(fmt: str, content: str, spans: Sequence[tuple[int, int]], labels: Sequence[str]) -> Document:
    """A document whose segments are the cue texts at spans, re-wrapped within each cue's line count."""
    newline = "\r\n" if "\r\n" in content else "\n"
    originals = [content[start:end] for start, end in spans]
    segments = tuple(" ".join(text.splitlines()) for text in originals)

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        edits = []
        for index, (translation, (start, end)) in enumerate(zip(translations, spans, strict=True)):
            if index in failed or translation == segments[index]:
                continue  # unchanged cues keep their own line breaks
            lines = max(1, len(originals[index].splitlines()))
            edits.append(Edit(start, end, newline.join(wrap_lines(translation, lines))))
        return splice(content, edits)

    return Document(fmt, segments, tuple(labels), rebuild)


def wrap_lines(text: str, lines: int) -> list[str]:
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

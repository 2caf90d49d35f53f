"""Markdown through markdown-it-py: only inline text is translated, sentence by sentence (pysbd)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import pysbd
from markdown_it import MarkdownIt

from hunyuan_serve.client.formats.base import Document, Edit, FormatError, Options, markup_flags, splice
from hunyuan_serve.client.placeholders import find_placeholders

# A translated line starting with one of these would turn a paragraph into another block: escape it.
_BLOCK_STARTS = ("#", ">", "-", "+", "*", "=", "|")


@dataclass(frozen=True)
class _Run:
    """One inline run (a paragraph, heading or table cell) and its sentences' segment indexes."""

    start: int
    end: int
    first: int
    count: int


def parse_markdown(content: str, options: Options) -> Document:
    """Paragraphs, headings and table cells split into sentences; code, HTML blocks and front matter kept."""
    lines = content.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    parsed = _front_matter_blanked(lines)
    segmenter = _segmenter(options.source or "en")
    segments: list[str] = []
    labels: list[str] = []
    runs: list[_Run] = []
    cursor: dict[int, int] = {}  # per line, where the last located cell ended (table rows hold many)
    for token in MarkdownIt("commonmark").enable("table").parse("".join(parsed)):
        if token.type != "inline" or token.map is None or not token.content.strip():
            continue
        span = _locate(content, lines, starts, token.map[0], token.content.split("\n"), cursor)
        sentences = split_sentences(segmenter, content[span[0] : span[1]])
        runs.append(_Run(span[0], span[1], len(segments), len(sentences)))
        segments.extend(sentences)
        labels.extend([f"line {token.map[0] + 1}"] * len(sentences))

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        edits = []
        for run in runs:
            new = translations[run.first : run.first + run.count]
            if list(new) == segments[run.first : run.first + run.count]:
                continue
            text = " ".join("".join(new).split())
            edits.append(Edit(run.start, run.end, "\\" + text if text.startswith(_BLOCK_STARTS) else text))
        return splice(content, edits)

    return Document("markdown", tuple(segments), tuple(labels), rebuild, formatted=markup_flags(segments))


def _front_matter_blanked(lines: Sequence[str]) -> list[str]:
    """The lines with a leading `---` YAML front matter block made blank (its keys are not prose)."""
    out = list(lines)
    if not out or out[0].rstrip("\r\n") != "---":
        return out
    for index in range(1, len(out)):
        if out[index].rstrip("\r\n") in ("---", "..."):
            return ["\n"] * (index + 1) + out[index + 1 :]
    return out


def _locate(
    content: str,
    lines: Sequence[str],
    starts: Sequence[int],
    first: int,
    parts: Sequence[str],
    cursor: dict[int, int],
) -> tuple[int, int]:
    """Offsets from the run's first character to its last, in the original text."""
    begin = end = -1
    for k, part in enumerate(parts):
        index = first + k
        at = lines[index].find(part, cursor.get(index, 0))
        if at < 0:
            raise FormatError(f"cannot locate the text {part!r} markdown-it read", index + 1)
        cursor[index] = at + len(part)
        if k == 0:
            begin = starts[index] + at
        end = starts[index] + at + len(part)
    return begin, end


@lru_cache(maxsize=8)
def _segmenter(language: str) -> pysbd.Segmenter:
    try:
        return pysbd.Segmenter(language=language.split("-")[0], clean=False, char_span=True)
    except ValueError:
        return pysbd.Segmenter(language="en", clean=False, char_span=True)


def split_sentences(segmenter: pysbd.Segmenter, text: str) -> list[str]:
    """text cut into sentences that join back to it; no cut falls inside a placeholder (code, URL, tag)."""
    # A line break inside a paragraph is only a soft wrap: pysbd sees a space there (same offsets).
    cuts = sorted({span.start for span in segmenter.segment(text.replace("\n", " "))} - {0})
    inside = [(ph.start, ph.end) for ph in find_placeholders(text)]
    cuts = [cut for cut in cuts if 0 < cut < len(text) and not any(a < cut < b for a, b in inside)]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]

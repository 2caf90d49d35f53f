"""Markdown through markdown-it-py: only inline text is translated, sentence by sentence (pysbd)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pysbd
from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline

from hunyuan_serve.localization.formats.base import Document, Edit, FormatError, Options, markup_flags, splice
from hunyuan_serve.text.placeholders import find_placeholders

# A translated line starting with one of these would turn a paragraph into another block: escape it.
_BLOCK_STARTS = ("#", ">", "-", "+", "*", "=", "|")
# A link or an image stands as a numbered tag pair in the text sent: <aN>text</aN>, <imgN>alt</imgN>.
# Its URL (and title) never reaches the model; the pair comes back around the translated text.
_TAG = re.compile(r"<(/?)(a|img)(\d+)>")
_LINKS_KEY = "hunyuan_serve.links"  # where the recording rules keep what they found, in markdown-it's env


@dataclass(frozen=True)
class _Run:
    """One inline run (a paragraph, heading or table cell), its sentences' segment indexes, and the
    markup its <aN>/<imgN> tags stand for."""

    start: int
    end: int
    first: int
    count: int
    markup: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class _Link:
    """A link or image as markdown-it parsed it, in offsets of its inline token's content:
    [start, label) is its opening (`[` or `![`), [label, label_end) its text, [label_end, end) the rest."""

    kind: str  # "a" or "img"
    start: int
    label: int
    label_end: int
    end: int


def parse_markdown(content: str, options: Options) -> Document:
    """Paragraphs, headings and table cells split into sentences; code, HTML blocks and front matter kept."""
    lines = content.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    segmenter = sentence_segmenter(options.source or "en")
    segments: list[str] = []
    labels: list[str] = []
    runs: list[_Run] = []
    cursor: dict[int, int] = {}  # per line, where the last located cell ended (table rows hold many)
    env: dict[str, Any] = {}
    for token in _parser().parse("".join(_front_matter_blanked(lines)), env):
        if token.type != "inline" or token.map is None or not token.content.strip():
            continue
        offsets = _locate(lines, starts, token.map[0], token.content.split("\n"), cursor)
        links = env.get(_LINKS_KEY, {}).get("links", {}).get(token.content, [])
        text, markup, keep = _tagged(token.content, links)
        sentences = split_sentences(segmenter, text, keep)
        runs.append(_Run(offsets[0], _end(token.content, offsets), len(segments), len(sentences), markup))
        segments.extend(sentences)
        labels.extend([f"line {token.map[0] + 1}"] * len(sentences))

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        edits = []
        for run in runs:
            new = translations[run.first : run.first + run.count]
            if list(new) == segments[run.first : run.first + run.count]:
                continue
            text = " ".join(_untagged("".join(new), run.markup).split())
            edits.append(Edit(run.start, run.end, "\\" + text if text.startswith(_BLOCK_STARTS) else text))
        return splice(content, edits)

    return Document("markdown", tuple(segments), tuple(labels), rebuild, formatted=markup_flags(segments))


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    """CommonMark with tables, its link, image and autolink rules wrapped to record where each link is."""
    md = MarkdownIt("commonmark").enable("table")
    for name in ("link", "image", "autolink"):
        rule = next(r.fn for r in md.inline.ruler.__rules__ if r.name == name)
        md.inline.ruler.at(name, _recording(name, rule))
    return md


def _recording(name: str, rule: Callable[[StateInline, bool], bool]) -> Callable[[StateInline, bool], bool]:
    def recorded(state: StateInline, silent: bool) -> bool:
        start = state.pos
        # Where the label ends, as the rule itself finds it (an image's label starts after its `!`).
        label_end = -1
        if not silent and name == "link" and state.src[start] == "[":
            label_end = state.md.helpers.parseLinkLabel(state, start, True)
        elif not silent and name == "image" and state.src.startswith("![", start):
            label_end = state.md.helpers.parseLinkLabel(state, start + 1, False)
        if not rule(state, silent):
            return False
        if not silent:
            found = _found(state)
            if name == "autolink":  # `<https://...>`: the URL is all of it, sent as an empty pair
                found.append(_Link("a", start, state.pos, state.pos, state.pos))
            elif label_end >= 0:
                kind, opening = ("a", 1) if name == "link" else ("img", 2)
                found.append(_Link(kind, start, start + opening, label_end, state.pos))
        return True

    return recorded


def _found(state: StateInline) -> list[_Link]:
    """The links found so far in the inline content being parsed, kept in the env by that content (two
    runs of the same text hold the same links; the state is held so that a new parse starts afresh)."""
    holder = state.env.setdefault(_LINKS_KEY, {"state": None, "links": {}})
    if holder["state"] is not state:
        holder["state"] = state
        holder["links"][state.src] = []
    found: list[_Link] = holder["links"][state.src]
    return found


def _tagged(
    inline: str, links: Sequence[_Link]
) -> tuple[str, tuple[tuple[str, str], ...], list[tuple[int, int]]]:
    """The run's text as sent (markdown-it's inline content: a continuation line's indent or `>` is not
    text): each link's markup a numbered tag pair; the markup each number stands for; and the spans of
    the text that hold a link (no sentence is cut inside one)."""
    pieces: list[tuple[int, int, str]] = []  # (start, end, replacement) in the inline content
    markup: list[tuple[str, str]] = []
    for number, link in enumerate(sorted(links, key=lambda item: item.start), 1):
        markup.append((inline[link.start : link.label], inline[link.label_end : link.end]))
        pieces += [(link.start, link.label, f"<{link.kind}{number}>")]
        pieces += [(link.label_end, link.end, f"</{link.kind}{number}>")]
    out: list[str] = []
    keep: list[tuple[int, int]] = []
    opened: dict[str, int] = {}
    pos = length = 0
    for a, b, tag in sorted(pieces):
        out.append(inline[pos:a])
        length += a - pos
        if tag.startswith("</"):
            keep.append((opened.pop(tag[2:]), length + len(tag)))
        else:
            opened[tag[1:]] = length
        out.append(tag)
        length += len(tag)
        pos = b
    out.append(inline[pos:])
    return "".join(out), tuple(markup), keep


def _untagged(text: str, markup: Sequence[tuple[str, str]]) -> str:
    """The run's markup back in place of its tags (a tag of a number it does not have is dropped)."""

    def original(match: re.Match[str]) -> str:
        index = int(match.group(3)) - 1
        if not 0 <= index < len(markup):
            return ""
        return markup[index][1 if match.group(1) else 0]

    return _TAG.sub(original, text)


def _end(inline: str, offsets: Sequence[int]) -> int:
    return offsets[-1] + len(inline.split("\n")[-1])


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
    lines: Sequence[str], starts: Sequence[int], first: int, parts: Sequence[str], cursor: dict[int, int]
) -> list[int]:
    """Where each line of the run starts in the original text (markdown-it strips indents and markers)."""
    found: list[int] = []
    for k, part in enumerate(parts):
        index = first + k
        at = lines[index].find(part, cursor.get(index, 0))
        if at < 0:
            raise FormatError(f"cannot locate the text {part!r} markdown-it read", index + 1)
        cursor[index] = at + len(part)
        found.append(starts[index] + at)
    return found


@lru_cache(maxsize=8)
def sentence_segmenter(language: str) -> pysbd.Segmenter:
    """pysbd's segmenter for a language code (English's for a language it does not have)."""
    try:
        return pysbd.Segmenter(language=language.split("-")[0], clean=False, char_span=True)
    except ValueError:
        return pysbd.Segmenter(language="en", clean=False, char_span=True)


def split_sentences(segmenter: pysbd.Segmenter, text: str, keep: Sequence[tuple[int, int]] = ()) -> list[str]:
    """text cut into sentences that join back to it; no cut falls inside a placeholder (code, URL, tag)
    nor inside a span of keep (a link: its tags stay in one segment)."""
    # A line break inside a paragraph is only a soft wrap: pysbd sees a space there (same offsets).
    cuts = sorted({span.start for span in segmenter.segment(text.replace("\n", " "))} - {0})
    inside = [(ph.start, ph.end) for ph in find_placeholders(text)] + list(keep)
    cuts = [cut for cut in cuts if 0 < cut < len(text) and not any(a < cut < b for a, b in inside)]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]

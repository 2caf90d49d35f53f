"""HTML through the standard library's parser (its positions): text runs and alt/title values in place."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser

from hunyuan_serve.localization.formats.base import Document, Edit, Options, markup_flags, splice
from hunyuan_serve.localization.formats.markdown import sentence_segmenter, split_sentences

# Elements whose content is not prose (kept as is), and the inline ones a sentence may run across.
_KEEP = {"script", "style", "pre", "code", "kbd", "samp", "textarea", "svg", "math", "template"}
_INLINE = {
    "a", "abbr", "b", "bdi", "bdo", "br", "cite", "data", "dfn", "em", "i", "img", "mark", "q", "s",
    "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr", "del", "ins", "label",
}  # fmt: skip
_ATTRIBUTES = ("alt", "title")


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    kind: str  # "run" (markup inside: kept raw) or the quote character of an attribute value


class _Collector(HTMLParser):
    """Offsets of every prose run and translatable attribute value, from HTMLParser's own positions."""

    def __init__(self, content: str) -> None:
        super().__init__(convert_charrefs=False)
        self.content = content
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", content)]
        self.spans: list[_Span] = []
        self.run: list[int] | None = None  # [start, end] of the run being read
        self.kept = 0  # depth inside elements whose content is kept

    def position(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def flush(self) -> None:
        if self.run is not None:
            self.spans.append(_Span(self.run[0], self.run[1], "run"))
        self.run = None

    def extend(self, start: int, end: int) -> None:
        if self.kept:
            return
        if self.run is None:
            self.run = [start, end]
        self.run[1] = end

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        start = self.position()
        raw = self.get_starttag_text() or ""
        self._attributes(start, raw)
        if tag in _KEEP:
            self.flush()
            self.kept += 1
        elif tag in _INLINE:
            self.extend(start, start + len(raw))
        else:
            self.flush()

    def handle_endtag(self, tag: str) -> None:
        start = self.position()
        if tag in _KEEP:
            self.kept = max(0, self.kept - 1)
        elif tag in _INLINE and self.run is not None:
            self.extend(start, self.content.index(">", start) + 1)
        else:
            self.flush()

    def handle_data(self, data: str) -> None:
        start = self.position()
        if self.run is not None or data.strip():
            self.extend(start, start + len(data))

    def handle_entityref(self, name: str) -> None:
        start = self.position()
        self.extend(start, self.content.index(";", start) + 1)

    handle_charref = handle_entityref

    def handle_comment(self, data: str) -> None:
        self.flush()

    def _attributes(self, start: int, raw: str) -> None:
        for name in _ATTRIBUTES:
            found = re.search(rf"\s{name}\s*=\s*(\"([^\"]*)\"|'([^']*)')", raw, re.I)
            if found and (found.group(2) or found.group(3) or "").strip():
                begin = start + found.start(1) + 1
                self.spans.append(_Span(begin, start + found.end(1) - 1, found.group(1)[0]))


def parse_html(content: str, options: Options) -> Document:
    """Prose split into sentences (inline tags go through as placeholders); alt and title translated."""
    collector = _Collector(content)
    collector.feed(content)
    collector.close()
    collector.flush()
    segmenter = sentence_segmenter(options.source or "en")
    spans = sorted(collector.spans, key=lambda s: s.start)
    pieces: list[tuple[_Span, list[str]]] = []
    for span in spans:
        raw = content[span.start : span.end]
        texts = split_sentences(segmenter, raw) if span.kind == "run" else [html.unescape(raw)]
        pieces.append((span, texts))
    segments = [text for _, texts in pieces for text in texts]
    labels = [f"line {content.count(chr(10), 0, span.start) + 1}" for span, texts in pieces for _ in texts]

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        new_texts: dict[_Span, str] = {}
        at = 0
        for span, texts in pieces:
            new = list(translations[at : at + len(texts)])
            at += len(texts)
            if new != texts:
                new_texts[span] = "".join(new) if span.kind == "run" else html.escape(new[0], quote=True)
        return splice(content, _edits(content, spans, new_texts))

    return Document("html", tuple(segments), tuple(labels), rebuild, formatted=markup_flags(segments))


def _edits(content: str, spans: Sequence[_Span], new_texts: dict[_Span, str]) -> list[Edit]:
    """One edit per changed span; an attribute inside a run is changed in the run's new text.

    The run's translation kept each tag byte for byte (tags are placeholders), so the tag that holds
    the attribute is found there and replaced by the same tag with the attribute translated.
    """
    runs = [s for s in spans if s.kind == "run"]
    edits: dict[_Span, str] = {s: t for s, t in new_texts.items() if s.kind == "run"}
    for span, text in new_texts.items():
        if span.kind == "run":
            continue
        owner = next((r for r in runs if r.start <= span.start and span.end <= r.end), None)
        if owner is None:
            edits[span] = text
            continue
        tag_start, tag_end = content.rfind("<", 0, span.start), content.index(">", span.end) + 1
        old_tag = content[tag_start:tag_end]
        new_tag = content[tag_start : span.start] + text + content[span.end : tag_end]
        run_text = edits.get(owner, content[owner.start : owner.end])
        edits[owner] = run_text.replace(old_tag, new_tag, 1)
    return [Edit(span.start, span.end, text) for span, text in edits.items()]

"""Android strings.xml through expat (its byte positions): string, string-array and plurals text in place."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from xml.parsers import expat
from xml.sax.saxutils import escape, unescape

from hunyuan_serve.client.formats.base import Document, Edit, FormatError, Options, escape_markup, splice

_TRANSLATED = {"string": None, "item": ("string-array", "plurals")}  # element -> parents it counts under
_CDATA = ("<![CDATA[", "]]>")


@dataclass(frozen=True)
class _Text:
    """One translatable element's inner text: where it lies and how it is written (plain, cdata, markup)."""

    start: int
    end: int
    mode: str
    label: str
    source: str


def parse_android(content: str, options: Options) -> Document:
    """Every translatable string, array item and plural item; translatable="false" ones are left alone."""
    texts = [_decode(content, found) for found in _elements(content)]
    segments = tuple(text.source for text in texts)

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        edits = [
            Edit(text.start, text.end, _encode(text.mode, new, content[text.start : text.end]))
            for index, (text, new) in enumerate(zip(texts, translations, strict=True))
            if index not in failed and new != text.source
        ]
        return splice(content, edits)

    return Document("android", segments, tuple(text.label for text in texts), rebuild)


def _elements(content: str) -> list[tuple[int, int, str]]:
    """(start, end, label) of each translatable element's inner text, as character offsets."""
    data = content.encode("utf-8")
    parser = expat.ParserCreate(encoding="utf-8")
    stack: list[tuple[str, dict[str, str], int]] = []
    found: list[tuple[int, int, str]] = []
    counts: dict[str, int] = {}

    def start(name: str, attrs: dict[str, str]) -> None:
        stack.append((name, attrs, parser.CurrentByteIndex))

    def end(name: str) -> None:
        _, attrs, at = stack.pop()
        parents = _TRANSLATED.get(name, ())
        owner = stack[-1] if stack else None
        if name not in _TRANSLATED or (parents and (owner is None or owner[0] not in parents)):
            return
        if (parents is None and len(stack) != 1) or "false" in (
            attrs.get("translatable"),
            _owner_flag(owner),
        ):
            return
        inner = data.index(b">", at) + 1  # attribute values hold no '>' in practice (expat allows it)
        if data[inner - 2 : inner] == b"/>":
            return
        label = attrs.get("name") or _item_label(owner, attrs, counts)
        found.append((len(data[:inner].decode()), len(data[: parser.CurrentByteIndex].decode()), label))

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as err:
        raise FormatError(f"not well-formed XML: {expat.ErrorString(err.code)}", err.lineno) from None
    return found


def _owner_flag(owner: tuple[str, dict[str, str], int] | None) -> str | None:
    return owner[1].get("translatable") if owner is not None and owner[0] != "resources" else None


def _item_label(
    owner: tuple[str, dict[str, str], int] | None, attrs: dict[str, str], counts: dict[str, int]
) -> str:
    name = owner[1].get("name", "?") if owner else "?"
    if "quantity" in attrs:
        return f"{name}[{attrs['quantity']}]"
    counts[name] = counts.get(name, -1) + 1
    return f"{name}[{counts[name]}]"


def _decode(content: str, found: tuple[int, int, str]) -> _Text:
    start, end, label = found
    raw = content[start:end]
    core = raw.strip()
    if core.startswith(_CDATA[0]) and core.endswith(_CDATA[1]):
        return _Text(start, end, "cdata", label, core[len(_CDATA[0]) : -len(_CDATA[1])])
    if "<" in raw or core.startswith('"'):
        return _Text(start, end, "markup", label, raw)  # child tags stay as they are (they are placeholders)
    return _Text(start, end, "plain", label, unescape(raw).replace("\\'", "'").replace('\\"', '"'))


def _encode(mode: str, text: str, original: str) -> str:
    """A translation written the way the element held its text (escapes Android's aapt requires)."""
    if mode == "cdata":
        lead = original[: len(original) - len(original.lstrip())]
        trail = original[len(original.rstrip()) :]
        return lead + _CDATA[0] + text.replace("]]>", "]]]]><![CDATA[>") + _CDATA[1] + trail
    if mode == "markup":
        return escape_markup(text)
    out = escape(text).replace("'", "\\'").replace('"', '\\"')
    return "\\" + out if out.startswith(("@", "?")) else out

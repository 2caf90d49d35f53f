"""Android strings.xml through expat (its byte positions): string, string-array and plurals text in place."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from xml.parsers import expat
from xml.sax.saxutils import escape, unescape

from hunyuan_serve.localization.formats.base import (
    Document,
    Edit,
    FormatError,
    Options,
    escape_markup,
    splice,
)
from hunyuan_serve.localization.formats.plurals import reshape

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
    element: tuple[int, int] = (0, 0)  # the whole element, tags included
    quantity: str | None = None  # a <plurals> item's
    group: int = -1  # which <plurals> it belongs to


@dataclass(frozen=True)
class _Found:
    start: int
    end: int
    label: str
    element: tuple[int, int]
    quantity: str | None
    group: int


def parse_android(content: str, options: Options) -> Document:
    """Every translatable string, array item and plural item; translatable="false" ones are left alone.

    With a target, each <plurals> gets the target's CLDR quantities: items it lacks are added (after
    the group's last item, laid out like it), items the language does not have are removed.
    """
    texts = [_decode(content, found) for found in _elements(content)]
    segments = tuple(text.source for text in texts)
    groups: dict[int, dict[str, int]] = {}
    for index, text in enumerate(texts):
        if text.quantity is not None and options.target:
            groups.setdefault(text.group, {})[text.quantity] = index

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        taken = dict(enumerate(translations))
        edits = [
            edit
            for group in groups.values()
            if "other" in group
            for edit in _plural_edits(content, texts, group, taken, failed, options.target)
        ]
        dropped = [(e.start, e.end) for e in edits if e.end > e.start]
        edits += [
            Edit(text.start, text.end, _encode(text.mode, taken[index], content[text.start : text.end]))
            for index, text in enumerate(texts)
            if index not in failed
            and taken[index] != text.source
            and not any(a <= text.start < b for a, b in dropped)
        ]
        return splice(content, edits)

    return Document("android", segments, tuple(text.label for text in texts), rebuild)


def _plural_edits(
    content: str,
    texts: Sequence[_Text],
    group: dict[str, int],
    taken: dict[int, str],
    failed: frozenset[int],
    target: str | None,
) -> list[Edit]:
    """Items added for the target's quantities the source lacks, removed for those it does not have."""
    plan = reshape({q: texts[i].source for q, i in group.items()}, target)
    edits = [  # a kept item translated from another (Russian "one" from "other") is written like that one
        Edit(*texts[group[q]].element, _item(content, texts[group[source]], q, taken[group[source]]))
        for q, source in plan.keep.items()
        if source != q and group[source] not in failed
    ]
    last = max((texts[group[q]] for q in plan.keep), key=lambda t: t.start)
    lead = content[: last.element[0]]
    indent = lead[len(lead.rstrip(" \t\r\n")) :]
    edits += [
        Edit(
            last.element[1],
            last.element[1],
            indent + _item(content, texts[group[source]], quantity, taken[group[source]]),
        )
        for quantity, source in plan.add
        if group[source] not in failed
    ]
    for quantity in plan.drop:
        start, end = texts[group[quantity]].element
        before = content[:start]
        edits.append(Edit(len(before.rstrip(" \t\r\n")), end, ""))
    return edits


def _item(content: str, like: _Text, quantity: str, text: str) -> str:
    """An <item> written as `like` is (its attributes, CDATA or escapes), for another quantity."""
    start, end = like.element
    opening = content[start : like.start]
    opening = opening.replace(f'quantity="{like.quantity}"', f'quantity="{quantity}"', 1).replace(
        f"quantity='{like.quantity}'", f"quantity='{quantity}'", 1
    )
    return opening + _encode(like.mode, text, content[like.start : like.end]) + content[like.end : end]


def _elements(content: str) -> list[_Found]:
    """Each translatable element's inner text, as character offsets, with its element and quantity."""
    data = content.encode("utf-8")
    parser = expat.ParserCreate(encoding="utf-8")
    stack: list[tuple[str, dict[str, str], int]] = []
    found: list[_Found] = []
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
        close = data.index(b">", parser.CurrentByteIndex) + 1
        plural = owner is not None and owner[0] == "plurals" and "quantity" in attrs
        found.append(
            _Found(
                len(data[:inner].decode()),
                len(data[: parser.CurrentByteIndex].decode()),
                label,
                (len(data[:at].decode()), len(data[:close].decode())),
                attrs["quantity"] if plural else None,
                owner[2] if plural and owner is not None else -1,
            )
        )

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


def _decode(content: str, found: _Found) -> _Text:
    start, end, label = found.start, found.end, found.label
    where = (found.element, found.quantity, found.group)
    raw = content[start:end]
    core = raw.strip()
    if core.startswith(_CDATA[0]) and core.endswith(_CDATA[1]):
        return _Text(start, end, "cdata", label, core[len(_CDATA[0]) : -len(_CDATA[1])], *where)
    if "<" in raw or core.startswith('"'):
        return _Text(start, end, "markup", label, raw, *where)  # child tags stay as they are (placeholders)
    text = unescape(raw).replace("\\'", "'").replace('\\"', '"')
    return _Text(start, end, "plain", label, text, *where)


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

"""XLIFF 1.2 and 2.0 through expat (its byte positions): targets written in place, their state set."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from xml.parsers import expat
from xml.sax.saxutils import escape, quoteattr, unescape

from hunyuan_serve.localization.formats.base import (
    Document,
    Edit,
    FormatError,
    Options,
    escape_markup,
    splice,
)

# Per version: the element holding one source/target pair, and the element whose start tag has the state.
_UNIT = {"1.2": "trans-unit", "2.0": "segment"}
_STATE = {"1.2": "translated", "2.0": "translated"}
# XLIFF 1.2's state for a unit whose translation lost a placeholder: the source is copied into the
# target for a reviewer, as translators' tools do. 2.0 has no such state (initial, translated,
# reviewed, final): there the unit is left as it was.
_REVIEW = {"1.2": "needs-review-translation"}
# The state of a target written but flagged by the service's checks, for a reviewer: 1.2 has its
# review state; 2.0's states are a progression, and a target still `initial` is one nobody has passed.
_FLAGGED = {"1.2": "needs-review-translation", "2.0": "initial"}
_UNTRANSLATED = {"new", "needs-translation", "initial"}


@dataclass
class _Unit:
    """Offsets (characters) inside one unit: its start tag, its source's inner text, its target if any."""

    label: str
    tag: tuple[int, int] = (0, 0)  # the state-bearing start tag (1.2: <target>, 2.0: <segment>)
    source: tuple[int, int] = (0, 0)
    source_end: int = 0  # just after </source>: where a missing target goes
    source_indent: str = ""
    target: tuple[int, int] | None = None
    target_tag: tuple[int, int] | None = None
    state: str | None = None
    skip: bool = False
    attrs: dict[str, str] = field(default_factory=dict)


def parse_xliff(content: str, options: Options) -> Document:
    """Units without a target (all with overwrite; never translate="no") are segments; notes are kept."""
    version, units, header = _walk(content)
    chosen = [u for u in units if not u.skip and (options.overwrite or not _translated(content, u))]
    segments = tuple(_text(content[slice(*u.source)]) for u in chosen)

    def rebuild(
        translations: Sequence[str], failed: frozenset[int], flagged: frozenset[int] = frozenset()
    ) -> str:
        edits: list[Edit] = []
        for index, (unit, new) in enumerate(zip(chosen, translations, strict=True)):
            if index not in failed:
                raw = escape_markup(new) if "<" in content[slice(*unit.source)] else escape(new)
                state = _FLAGGED[version] if index in flagged else _STATE[version]
                edits.extend(_unit_edits(content, version, unit, raw, state))
            elif version in _REVIEW:
                edits.extend(
                    _unit_edits(content, version, unit, content[slice(*unit.source)], _REVIEW[version])
                )
        # The file names the target language once it holds a translation into it.
        language = _language_edit(content, version, header, options.target) if edits else []
        return splice(content, [*edits, *language])

    labels = tuple(u.label for u in chosen)
    state = f'state="{_FLAGGED[version]}"'
    return Document(f"xliff{version}", segments, labels, rebuild, review=rebuild, review_state=state)


def _translated(content: str, unit: _Unit) -> bool:
    has_text = unit.target is not None and content[slice(*unit.target)].strip() != ""
    # A source copied for review (ours, or any tool's) is not a translation: the next run tries again.
    copied = (
        unit.state == _REVIEW["1.2"]
        and unit.target is not None
        and content[slice(*unit.target)] == content[slice(*unit.source)]
    )
    return has_text and (unit.state or "") not in _UNTRANSLATED and not copied


def _text(raw: str) -> str:
    return raw if "<" in raw else unescape(raw)


def _walk(content: str) -> tuple[str, list[_Unit], tuple[int, int]]:
    """The version, every unit, and the start tag that names the target language (1.2 <file>, 2.0 <xliff>)."""
    data = content.encode("utf-8")
    parser = expat.ParserCreate(encoding="utf-8")
    chars = _CharOffsets(data)
    stack: list[tuple[str, dict[str, str], int]] = []
    units: list[_Unit] = []
    found: dict[str, object] = {"version": "1.2", "header": (0, 0)}

    def start(name: str, attrs: dict[str, str]) -> None:
        at = parser.CurrentByteIndex
        tag = (chars(at), chars(data.index(b">", at) + 1))
        if name == "xliff":
            found["version"] = "2.0" if attrs.get("version", "").startswith("2") else "1.2"
            found["header"] = tag
        elif name == "file" and found["version"] == "1.2":
            found["header"] = tag
        elif name == _UNIT[str(found["version"])]:
            label = attrs.get("id") or (stack[-1][1].get("id", "") if stack else "")
            units.append(
                _Unit(label=f"unit {label}", tag=tag, skip=attrs.get("translate") == "no", attrs=attrs)
            )
            if found["version"] == "2.0":
                units[-1].state = attrs.get("state")
        elif name == "target" and units and found["version"] == "1.2":
            units[-1].target_tag, units[-1].state = tag, attrs.get("state")
        stack.append((name, attrs, at))

    def end(name: str) -> None:
        _, _, at = stack.pop()
        if (
            name not in ("source", "target")
            or not units
            or not stack
            or stack[-1][0] != _UNIT[str(found["version"])]
        ):
            return
        inner_start, inner_end = chars(data.index(b">", at) + 1), chars(parser.CurrentByteIndex)
        closing = chars(data.index(b">", parser.CurrentByteIndex) + 1)
        if data[data.index(b">", at) - 1 : data.index(b">", at)] == b"/":
            inner_end = closing = inner_start  # <target/>
        if name == "source":
            line_start = content.rfind("\n", 0, chars(at)) + 1
            units[-1].source, units[-1].source_end = (inner_start, inner_end), closing
            # Only the line's indent: a unit written on one line has its start tag before the source.
            before = content[line_start : chars(at)]
            units[-1].source_indent = before[: len(before) - len(before.lstrip(" \t"))]
        else:
            units[-1].target = (inner_start, inner_end)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as err:
        raise FormatError(f"not well-formed XML: {expat.ErrorString(err.code)}", err.lineno) from None
    return str(found["version"]), units, found["header"]  # type: ignore[return-value]


class _CharOffsets:
    """Byte offsets (what expat reports) to character offsets in the decoded text."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __call__(self, byte_offset: int) -> int:
        return len(self.data[:byte_offset].decode("utf-8"))


def _unit_edits(content: str, version: str, unit: _Unit, raw: str, state: str) -> list[Edit]:
    if unit.target is not None:
        if unit.target[0] == unit.target[1] and content[unit.target[0] - 2 : unit.target[0]] == "/>":
            tag_start = content.rfind("<target", 0, unit.target[0])
            edits = [
                Edit(
                    tag_start,
                    unit.target[0],
                    _target(version, raw, unit.source_indent, state)[len(unit.source_indent) :],
                )
            ]
            return [*edits, *_state_edit(content, unit.tag, state)] if version == "2.0" else edits
        edits = [Edit(*unit.target, raw)]
        tag = unit.tag if version == "2.0" else unit.target_tag
        return [*edits, *_state_edit(content, tag, state)] if tag else edits
    insert = "\n" + _target(version, raw, unit.source_indent, state)
    edits = [Edit(unit.source_end, unit.source_end, insert)]
    return [*edits, *_state_edit(content, unit.tag, state)] if version == "2.0" else edits


def _target(version: str, raw: str, indent: str, state: str) -> str:
    attribute = f' state="{state}"' if version == "1.2" else ""
    return f"{indent}<target{attribute}>{raw}</target>"


def _state_edit(content: str, tag: tuple[int, int], state: str) -> list[Edit]:
    return _attribute_edit(content, tag, "state", state)


def _attribute_edit(content: str, tag: tuple[int, int], name: str, value: str) -> list[Edit]:
    """Set an attribute in the start tag at tag: its value replaced, or the attribute added."""
    text = content[tag[0] : tag[1]]
    found = re.search(rf"\s{name}\s*=\s*(\"[^\"]*\"|'[^']*')", text)
    if found:
        if found.group(1)[1:-1] == value:
            return []
        return [Edit(tag[0] + found.start(1), tag[0] + found.end(1), quoteattr(value))]
    end = tag[1] - (2 if text.endswith("/>") else 1)
    return [Edit(end, end, f" {name}={quoteattr(value)}")]


def _language_edit(content: str, version: str, header: tuple[int, int], target: str | None) -> list[Edit]:
    if target is None or header == (0, 0):
        return []
    return _attribute_edit(content, header, "target-language" if version == "1.2" else "trgLang", target)

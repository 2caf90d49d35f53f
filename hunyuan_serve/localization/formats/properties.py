"""Java .properties (java.util.Properties' grammar): values replaced in place, keys and comments kept.

No Python library reports where a value lies in the file, so the logical lines are read here exactly as
Properties.load specifies: comments (# !), continuation lines, the first unescaped = : or blank ends a key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hunyuan_serve.localization.formats.base import Document, Edit, FormatError, Options, splice

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


@dataclass(frozen=True)
class _Entry:
    key: str
    start: int  # the value's first character
    end: int  # the end of its logical line, before the line break
    value: str  # decoded


def parse_properties(content: str, options: Options) -> Document:
    """Every non-empty value is a segment; a translation is written with the escapes the file uses."""
    entries = [e for e in _entries(content) if e.value.strip()]
    ascii_file = content.isascii()  # Latin-1/ASCII files carry other characters as \\uXXXX

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        edits = [
            Edit(e.start, e.end, _encode(new, ascii_file))
            for index, (e, new) in enumerate(zip(entries, translations, strict=True))
            if index not in failed and new != e.value
        ]
        return splice(content, edits)

    return Document("properties", tuple(e.value for e in entries), tuple(e.key for e in entries), rebuild)


def _entries(content: str) -> list[_Entry]:
    lines = content.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    entries: list[_Entry] = []
    index = 0
    while index < len(lines):
        first = index
        text = lines[index].rstrip("\r\n")
        while _continues(lines[index].rstrip("\r\n")) and index + 1 < len(lines):
            index += 1
        end = offsets[index] + len(lines[index].rstrip("\r\n"))
        index += 1
        stripped = text.lstrip(" \t\f")
        if not stripped or stripped[0] in "#!":
            continue
        start = offsets[first] + len(text) - len(stripped)
        entries.append(_entry(content, start, end, first + 1))
    return entries


def _continues(line: str) -> bool:
    """A line ending in an odd number of backslashes goes on on the next line."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _entry(content: str, start: int, end: int, line: int) -> _Entry:
    at = start
    while at < end and content[at] not in "=: \t\f\r\n":
        at += 2 if content[at] == "\\" else 1
    key = _decode(content[start:at], line)
    while at < end and content[at] in " \t\f":
        at += 1
    if at < end and content[at] in "=:":
        at += 1
    while at < end and content[at] in " \t\f":
        at += 1
    return _Entry(key, at, end, _decode(content[at:end], line))


def _decode(raw: str, line: int) -> str:
    out: list[str] = []
    at = 0
    while at < len(raw):
        char = raw[at]
        if char != "\\":
            out.append(char)
            at += 1
            continue
        nxt = raw[at + 1 : at + 2]
        if nxt in ("\n", "\r"):  # a continuation: the break and the next line's leading blanks go
            at += 2 + (raw[at + 1 : at + 3] == "\r\n")
            while at < len(raw) and raw[at] in " \t\f":
                at += 1
        elif nxt == "u":
            digits = raw[at + 2 : at + 6]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise FormatError(f"malformed \\uxxxx escape: \\u{digits}", line) from None
            at += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            at += 2
    return "".join(out)


def _encode(text: str, ascii_only: bool) -> str:
    out: list[str] = []
    for index, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char in "\t\n\r\f":
            out.append("\\" + next(k for k, v in _ESCAPES.items() if v == char))
        elif char == " " and index == 0:
            out.append("\\ ")
        elif ascii_only and ord(char) > 0x7E:
            out.append("".join(f"\\u{unit:04x}" for unit in _utf16(char)))
        else:
            out.append(char)
    return "".join(out)


def _utf16(char: str) -> list[int]:
    data = char.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]

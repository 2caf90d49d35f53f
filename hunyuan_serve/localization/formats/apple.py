"""Apple .strings (read as NSString's parser reads them) and .stringsdict (a plist, through expat)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from xml.parsers import expat
from xml.sax.saxutils import escape, unescape

from hunyuan_serve.localization.formats.base import Document, Edit, FormatError, Options, line_of, splice

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'"}
_VARIABLES = re.compile(r"(?:\s*%#@\w+@\s*)+")  # a format key that only names its variables: no words
_PLURAL_KEYS = {"zero", "one", "two", "few", "many", "other", "NSStringLocalizedFormatKey"}


@dataclass(frozen=True)
class _Value:
    label: str
    start: int
    end: int
    text: str


def parse_strings(content: str, options: Options) -> Document:
    """Each "key" = "value"; is a segment (its value); comments, keys and layout are kept."""
    values = _strings_values(content)

    def encode(text: str) -> str:
        return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")

    return _document("strings", content, values, encode)


def parse_stringsdict(content: str, options: Options) -> Document:
    """The plural forms (zero ... other) and format strings of each entry; keys and the plist kept."""
    return _document("stringsdict", content, _plist_values(content), escape)


def _document(fmt: str, content: str, values: Sequence[_Value], encode: Callable[[str], str]) -> Document:
    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        edits = [
            Edit(v.start, v.end, encode(new))
            for index, (v, new) in enumerate(zip(values, translations, strict=True))
            if index not in failed and new != v.text
        ]
        return splice(content, edits)

    return Document(fmt, tuple(v.text for v in values), tuple(v.label for v in values), rebuild)


def _strings_values(content: str) -> list[_Value]:
    values: list[_Value] = []
    at = 0
    while True:
        at = _skip(content, at)
        if at >= len(content):
            return values
        key, _, _, at = _token(content, at)
        at = _skip(content, at)
        if content[at : at + 1] != "=":
            raise FormatError(f"expected '=' after {key!r}", line_of(content, at))
        value, start, end, at = _token(content, _skip(content, at + 1))
        at = _skip(content, at)
        if content[at : at + 1] != ";":
            raise FormatError(f"expected ';' after the value of {key!r}", line_of(content, at))
        values.append(_Value(key, start, end, value))
        at += 1


def _skip(content: str, at: int) -> int:
    """Past blanks and /* */ or // comments."""
    while at < len(content):
        if content[at].isspace():
            at += 1
        elif content.startswith("/*", at):
            close = content.find("*/", at + 2)
            if close < 0:
                raise FormatError("unterminated /* comment", line_of(content, at))
            at = close + 2
        elif content.startswith("//", at):
            newline = content.find("\n", at)
            at = len(content) if newline < 0 else newline + 1
        else:
            break
    return at


def _token(content: str, at: int) -> tuple[str, int, int, int]:
    """A quoted string (decoded) or a bare word: (text, inner start, inner end, position after it)."""
    if content[at : at + 1] != '"':
        end = at
        while end < len(content) and (content[end].isalnum() or content[end] in "_.-$"):
            end += 1
        if end == at:
            raise FormatError(
                f"expected a quoted string, found {content[at : at + 20]!r}", line_of(content, at)
            )
        return content[at:end], at, end, end
    out: list[str] = []
    pos = at + 1
    while pos < len(content) and content[pos] != '"':
        if content[pos] == "\\":
            pos, char = _escape(content, pos)
            out.append(char)
        else:
            out.append(content[pos])
            pos += 1
    if pos >= len(content):
        raise FormatError("unterminated string", line_of(content, at))
    return "".join(out), at + 1, pos, pos + 1


def _escape(content: str, pos: int) -> tuple[int, str]:
    char = content[pos + 1 : pos + 2]
    if char in ("U", "u"):
        digits = content[pos + 2 : pos + 6]
        try:
            return pos + 6, chr(int(digits, 16))
        except ValueError:
            raise FormatError(f"bad \\U escape {digits!r}", line_of(content, pos)) from None
    return pos + 2, _ESCAPES.get(char, char)


def _plist_values(content: str) -> list[_Value]:
    """Each <string> right after a <key> naming a plural form or the format key, with its offsets."""
    data = content.encode("utf-8")
    parser = expat.ParserCreate(encoding="utf-8")
    found: list[_Value] = []
    names: list[str] = []  # the entry and variable keys seen, for labels
    state: dict[str, Any] = {"key": "", "text": "", "start": 0}

    def chars(offset: int) -> int:
        return len(data[:offset].decode("utf-8"))

    def start(name: str, attrs: dict[str, str]) -> None:
        state["start"], state["text"] = data.index(b">", parser.CurrentByteIndex) + 1, ""

    def text(value: str) -> None:
        state["text"] = f"{state['text']}{value}"

    def end(name: str) -> None:
        begin, finish = chars(int(state["start"])), chars(parser.CurrentByteIndex)
        if name == "key":
            state["key"] = str(state["text"])
            if state["key"] not in _PLURAL_KEYS and not str(state["key"]).startswith("NSString"):
                names.append(str(state["key"]))
            return
        only_variables = _VARIABLES.fullmatch(content[begin:finish]) is not None
        if name == "string" and state["key"] in _PLURAL_KEYS and begin < finish and not only_variables:
            label = f"{'.'.join(names[-2:])}[{state['key']}]"
            found.append(_Value(label, begin, finish, unescape(content[begin:finish])))
        state["key"] = ""

    parser.StartElementHandler = start
    parser.CharacterDataHandler = text
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as err:
        raise FormatError(f"not well-formed XML: {expat.ErrorString(err.code)}", err.lineno) from None
    return found

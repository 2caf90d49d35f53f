"""JSON localization files (flat, nested, i18next) and Flutter ARB: string values replaced where they lie."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hunyuan_serve.client.formats.base import Document, Edit, FormatError, Options, splice

Path_ = tuple[str | int, ...]
_WHITESPACE = " \t\n\r"
_SCANNER = json.JSONDecoder()
# The json module's own string scanner (C where built), which reports where each string ends.
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


@dataclass(frozen=True)
class _String:
    """A string value: its path of keys and where its characters (between the quotes) lie."""

    path: Path_
    start: int
    end: int
    text: str


def parse_json(content: str) -> Document:
    """A JSON object of strings, flat or nested (lists too): strings are segments, the rest is kept."""
    return _document("json", content, _strings(content))


def parse_json_options(content: str, options: Options) -> Document:
    return parse_json(content)


def parse_arb(content: str, options: Options) -> Document:
    """Flutter ARB: message values are segments; "@" metadata kept; "@@locale" set to the target."""
    found = _strings(content)
    messages = [s for s in found if not str(s.path[0]).startswith("@")]
    locale = next((s for s in found if s.path == ("@@locale",)), None)
    extra = (
        [] if locale is None or options.target is None else [Edit(locale.start, locale.end, options.target)]
    )
    return _document("arb", content, messages, extra)


def _document(fmt: str, content: str, strings: Sequence[_String], extra: Sequence[Edit] = ()) -> Document:
    ascii_only = content.isascii() and "\\u" in content  # a file written with \\u escapes keeps them

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        edits = [
            Edit(s.start, s.end, json.dumps(new, ensure_ascii=ascii_only)[1:-1])
            for index, (s, new) in enumerate(zip(strings, translations, strict=True))
            if index not in failed and new != s.text
        ]
        return splice(content, [*edits, *extra] if edits else [])

    return Document(fmt, tuple(s.text for s in strings), tuple(_label(s.path) for s in strings), rebuild)


def _strings(content: str) -> list[_String]:
    try:
        data = json.loads(content)
    except json.JSONDecodeError as err:
        raise FormatError(f"not valid JSON: {err.msg} (column {err.colno})", err.lineno) from None
    if not isinstance(data, dict):
        raise FormatError("a JSON localization file must be an object mapping keys to strings")
    found: list[_String] = []
    _walk(content, _skip(content, 0), (), found)
    return found


def _walk(content: str, at: int, path: Path_, found: list[_String]) -> int:
    """Walk the value at `at` with the json module's own scanners; return where it ends."""
    char = content[at]
    if char == '"':
        text, end = scanstring(content, at + 1)
        found.append(_String(path, at + 1, end - 1, text))
        return end
    if char not in "{[":
        return int(_SCANNER.raw_decode(content, at)[1])
    closing, index = ("}" if char == "{" else "]"), 0
    at = _skip(content, at + 1)
    while content[at] != closing:
        if char == "{":
            key, at = scanstring(content, at + 1)
            at = _skip(content, _skip(content, at) + 1)  # past the ':'
            at = _walk(content, at, (*path, key), found)
        else:
            at = _walk(content, at, (*path, index), found)
            index += 1
        at = _skip(content, at)
        if content[at] == ",":
            at = _skip(content, at + 1)
    return at + 1


def _skip(content: str, at: int) -> int:
    while at < len(content) and content[at] in _WHITESPACE:
        at += 1
    return at


def _label(path: Path_) -> str:
    return "".join(
        f"[{part}]" if isinstance(part, int) else ("." if i else "") + part for i, part in enumerate(path)
    )

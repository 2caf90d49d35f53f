"""Plain text (a segment a line) and JSON localization files (string values, flat or nested)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from hunyuan_serve.client.formats.base import Document, FormatError, Options

Path_ = tuple[str | int, ...]


def parse_text(content: str) -> Document:
    """One segment a line; blank lines and line endings ('\\r' stays with its line) are kept."""
    lines = content.split("\n")
    trailing_newline = content.endswith("\n")
    if trailing_newline:
        lines.pop()

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        return "\n".join(translations) + ("\n" if trailing_newline else "")

    labels = tuple(f"line {n}" for n in range(1, len(lines) + 1))
    return Document("text", tuple(lines), labels, rebuild)


def parse_json(content: str) -> Document:
    """A JSON object of strings, flat or nested (lists too): strings are segments, the rest is kept."""
    try:
        data = json.loads(content)
    except json.JSONDecodeError as err:
        raise FormatError(f"not valid JSON: {err.msg} (column {err.colno})", err.lineno) from None
    if not isinstance(data, dict):
        raise FormatError("a JSON localization file must be an object mapping keys to strings")
    paths: list[Path_] = []
    segments: list[str] = []
    _collect(data, (), paths, segments)
    indent = _json_indent(content)
    trailing_newline = content.endswith("\n")

    def rebuild(translations: Sequence[str], failed: frozenset[int]) -> str:
        out = _replace(data, dict(zip(paths, translations, strict=True)), ())
        text = json.dumps(out, ensure_ascii=False, indent=indent)
        return text + ("\n" if trailing_newline else "")

    labels = tuple(_label(path) for path in paths)
    return Document("json", tuple(segments), labels, rebuild)


def _collect(node: Any, path: Path_, paths: list[Path_], segments: list[str]) -> None:
    if isinstance(node, str):
        paths.append(path)
        segments.append(node)
    elif isinstance(node, dict):
        for key, value in node.items():
            _collect(value, (*path, key), paths, segments)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _collect(value, (*path, index), paths, segments)


def _replace(node: Any, new: dict[Path_, str], path: Path_) -> Any:
    if isinstance(node, str):
        return new[path]
    if isinstance(node, dict):
        return {key: _replace(value, new, (*path, key)) for key, value in node.items()}
    if isinstance(node, list):
        return [_replace(value, new, (*path, index)) for index, value in enumerate(node)]
    return node


def _json_indent(content: str) -> int | None:
    """The indent of the input's first nested line, so a rewritten file diffs cleanly."""
    match = re.search(r"^[{\[][ \t]*\r?\n([ \t]+)\S", content.lstrip())
    if match is None:
        return None if "\n" not in content.strip() else 2
    ws = match.group(1)
    return len(ws.expandtabs(4))


def _label(path: Path_) -> str:
    return "".join(
        f"[{part}]" if isinstance(part, int) else ("." if i else "") + part for i, part in enumerate(path)
    )


def parse_text_options(content: str, options: Options) -> Document:
    return parse_text(content)


def parse_json_options(content: str, options: Options) -> Document:
    return parse_json(content)

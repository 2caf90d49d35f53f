"""Plain text: a segment a line."""

from __future__ import annotations

from collections.abc import Sequence

from hunyuan_serve.localization.formats.base import Document, Options


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


def parse_text_options(content: str, options: Options) -> Document:
    return parse_text(content)

"""Placeholders ({name}, %s, {{var}}, tags, code spans, URLs): found in a text, kept out of its words."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

# HTML's void elements: a tag of one opens nothing (no closing tag follows).
VOID_ELEMENTS = frozenset(
    (
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    )
)
# Order matters where two kinds start at the same place: a URL may hold braces or percent signs,
# and a Jinja/Mustache `{{ var }}` must win over the plain `{var}` inside it.
_KINDS: tuple[tuple[str, str], ...] = (
    # ASCII only, so a URL stops where CJK text glued to it begins; trailing punctuation is prose.
    ("url", r"(?:https?|ftp)://[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*[A-Za-z0-9\-_~/#=&%+]"),
    ("code", r"``[^`\n]+``|`[^`\n]+`"),
    ("jinja", r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}"),
    ("brace", r"\{[^{}\n]{0,80}\}"),
    # printf: %s, %5.2f, %(name)d; a bare '%' after a number ("50% done") is not one.
    (
        "printf",
        r"%\([A-Za-z0-9_.-]+\)[-#0+ ]*\d*(?:\.\d+)?[sdifeEgGxXoucr]"
        r"|%[-#0+]?\d*(?:\.\d+)?[sdifeEgGxXouc](?![A-Za-z])"
        # Positional (%1$s: Android, Apple) and with length modifiers or Apple's object %@ (%lld, %1$@).
        r"|%(?:\d+\$)?[-#0+]?\d*(?:\.\d+)?(?:hh|h|ll|l|q|z|t|j)?[@sdiuxXofeEgGc](?![A-Za-z])",
    ),
    ("html", r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s+[^<>]*?)?\s*/?>"),
    ("entity", r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#x[0-9A-Fa-f]{1,6});"),
)
_PATTERN = re.compile("|".join(f"(?P<{kind}>{regex})" for kind, regex in _KINDS))


@dataclass(frozen=True)
class Placeholder:
    """One protected span of a string."""

    kind: str
    text: str
    start: int
    end: int


def find_placeholders(text: str) -> list[Placeholder]:
    """Every placeholder in text, left to right, non-overlapping."""
    found = []
    for match in _PATTERN.finditer(text):
        kind = match.lastgroup or "unknown"
        found.append(Placeholder(kind, match.group(), match.start(), match.end()))
    return found


def split_protected(text: str) -> list[tuple[str, bool]]:
    """Text cut into (chunk, is_placeholder) pieces that join back to text."""
    pieces: list[tuple[str, bool]] = []
    pos = 0
    for ph in find_placeholders(text):
        if ph.start > pos:
            pieces.append((text[pos : ph.start], False))
        pieces.append((ph.text, True))
        pos = ph.end
    if pos < len(text):
        pieces.append((text[pos:], False))
    return pieces


def has_words(text: str, protected_terms: Iterable[str] = ()) -> bool:
    """Whether anything is left to translate once placeholders and kept terms are taken out."""
    rest = "".join(chunk for chunk, is_ph in split_protected(text) if not is_ph)
    for term in sorted(protected_terms, key=len, reverse=True):
        rest = rest.replace(term, " ")
    return any(unicodedata.category(ch).startswith("L") for ch in rest)

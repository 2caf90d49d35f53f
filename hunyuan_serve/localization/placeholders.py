"""Check that a translation kept the placeholders of its source ({name}, %s, {{var}}, tags, URLs)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from hunyuan_serve.text.placeholders import find_placeholders

# Placeholders whose meaning depends on their order: reordering them breaks the format call.
_POSITIONAL = re.compile(r"^(?:%[-#0+]?\d*(?:\.\d+)?[sdifeEgGxXouc]|\{\}|\{:[^{}]*\})$")


def placeholder_problems(source: str, translation: str, protected_terms: Sequence[str] = ()) -> list[str]:
    """What a translation broke: missing, extra or reordered placeholders, lost kept terms.

    An empty list means the translation can be used as it is.
    """
    problems: list[str] = []
    src = [ph.text for ph in find_placeholders(source)]
    out = [ph.text for ph in find_placeholders(translation)]
    src_count, out_count = Counter(src), Counter(out)
    missing = src_count - out_count
    extra = out_count - src_count
    if missing:
        problems.append("missing " + ", ".join(_describe(missing)))
    if extra:
        problems.append("unexpected " + ", ".join(_describe(extra)))
    if not missing and not extra:
        src_pos = [text for text in src if _POSITIONAL.match(text)]
        out_pos = [text for text in out if _POSITIONAL.match(text)]
        if src_pos != out_pos:
            problems.append("positional placeholders reordered: " + " ".join(out_pos))
    for term in dict.fromkeys(protected_terms):
        if translation.count(term) < source.count(term):
            problems.append(f"kept term {term!r} lost")
    return problems


def _describe(counts: Counter[str]) -> list[str]:
    return [repr(text) if n == 1 else f"{text!r} x{n}" for text, n in counts.items()]

"""Glossary (term -> fixed translation) and do-not-translate terms, loaded from files and applied."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hunyuan_serve.text.placeholders import split_protected


class GlossaryError(ValueError):
    """A glossary or keep-list file that cannot be used, naming the file and line."""


@dataclass(frozen=True)
class FixedTerms:
    """Terms with a fixed rendering; a term mapped to itself is kept untranslated."""

    terms: Mapping[str, str] = field(default_factory=dict)

    def whole(self, segment: str) -> str | None:
        """The fixed rendering when the whole segment is a glossary term."""
        return self.terms.get(segment)

    def apply(self, segment: str) -> tuple[str, tuple[str, ...]]:
        """Put fixed renderings in place of the terms found outside placeholders.

        Returns the text to send and the renderings it now holds, which the translation must keep.
        Pre-substituting the target term steers the model better than a sentinel it may mangle.
        """
        pattern = self._pattern()
        if pattern is None:
            return segment, ()
        used: list[str] = []

        def substitute(match: re.Match[str]) -> str:
            rendering = self.terms[match.group()]
            used.append(rendering)
            return rendering

        parts = [
            chunk if is_ph else pattern.sub(substitute, chunk) for chunk, is_ph in split_protected(segment)
        ]
        return "".join(parts), tuple(dict.fromkeys(used))

    def _pattern(self) -> re.Pattern[str] | None:
        if not self.terms:
            return None
        alternatives = []
        # Longest first, so "Stable Diffusion checkpoint" wins over "Stable Diffusion".
        for term in sorted(self.terms, key=len, reverse=True):
            left = r"(?<!\w)" if term[:1].isalnum() or term[:1] == "_" else ""
            right = r"(?!\w)" if term[-1:].isalnum() or term[-1:] == "_" else ""
            alternatives.append(left + re.escape(term) + right)
        return re.compile("|".join(alternatives))


def parse_glossary(text: str, source: str = "glossary") -> dict[str, str]:
    """Parse a glossary: a JSON object, or lines 'term<TAB>translation' / 'term = translation'.

    A line with a term alone (or an empty translation) keeps the term as it is. '#' starts a comment line.
    """
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise GlossaryError(f"{source}: not valid JSON: {err}") from None
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise GlossaryError(f"{source}: a JSON glossary must map terms to strings")
        return {k: v or k for k, v in data.items() if k.strip()}
    terms: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if "\t" in line:
            term, _, rendering = line.partition("\t")
        elif " = " in line:
            term, _, rendering = line.partition(" = ")
        else:
            term, rendering = line, ""
        term, rendering = term.strip(), rendering.strip()
        if not term:
            raise GlossaryError(f"{source}:{number}: empty term")
        terms[term] = rendering or term
    return terms


def parse_keep_list(text: str) -> dict[str, str]:
    """A do-not-translate list: one term a line, '#' comment lines; each term maps to itself."""
    terms = (line.strip() for line in text.splitlines())
    return {term: term for term in terms if term and not term.startswith("#")}


def load_glossary(glossary: Path | None = None, keep: Path | None = None) -> FixedTerms:
    """Merge a glossary file and a do-not-translate list (one term a line) into one FixedTerms."""
    terms: dict[str, str] = {}
    for path, keep_only in ((glossary, False), (keep, True)):
        if path is None:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise GlossaryError(f"cannot read {path}: {err.strerror}") from None
        terms.update(parse_keep_list(text) if keep_only else parse_glossary(text, str(path)))
    return FixedTerms(terms)

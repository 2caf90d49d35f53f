"""A request's glossary: accepted shapes, limits, and the terms found in the text (only those are sent)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.families.base import GlossaryInvalid

# Limits on one request's glossary: ReplicaConfig's fields are their one home (and say why these values);
# these names are its defaults, for callers without a config. The replica passes its configured values.
MAX_GLOSSARY_TERMS: int = ReplicaConfig.model_fields["max_glossary_terms"].default
MAX_TERM_CHARS: int = ReplicaConfig.model_fields["max_glossary_term_chars"].default

Terms = tuple[tuple[str, str], ...]


def parse_request_glossary(
    value: Any, max_terms: int = MAX_GLOSSARY_TERMS, max_chars: int = MAX_TERM_CHARS
) -> Terms:
    """A glossary as the API takes it: {"source": "target", ...} or [{"source": ..., "target": ...}, ...]."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        pairs = [(key, val, f"glossary[{key!r}]") for key, val in value.items()]
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        pairs = [_entry_pair(entry, index) for index, entry in enumerate(value)]
    else:
        raise GlossaryInvalid(
            'glossary must be an object {"term": "translation"} or a list of {source, target}'
        )
    if len(pairs) > max_terms:
        raise GlossaryInvalid(f"glossary has {len(pairs)} terms; at most {max_terms} are allowed")
    terms: dict[str, str] = {}
    for source, target, where in pairs:
        if not isinstance(source, str) or not isinstance(target, str):
            raise GlossaryInvalid(f"{where}: source and target must be strings")
        source, target = source.strip(), target.strip()
        if not source or not target:
            raise GlossaryInvalid(f"{where}: source and target must not be empty")
        if "\x00" in source or "\x00" in target:  # as for a text: no prompt or cache key holds a NUL
            raise GlossaryInvalid(f"{where}: a term must not hold a NUL character")
        if len(source) > max_chars or len(target) > max_chars:
            raise GlossaryInvalid(f"{where}: a term is longer than {max_chars} characters")
        terms[source] = target
    return tuple(terms.items())


def _entry_pair(entry: Any, index: int) -> tuple[Any, Any, str]:
    where = f"glossary[{index}]"
    if not isinstance(entry, Mapping) or set(entry) != {"source", "target"}:
        raise GlossaryInvalid(f'{where}: each entry must be {{"source": ..., "target": ...}}')
    return entry["source"], entry["target"], where


def terms_in_text(terms: Terms, text: str) -> Terms:
    """The terms that occur in the text, in glossary order: whole words for word-edged terms, any case."""
    return tuple((source, target) for source, target in terms if _occurs(source, text))


# Scripts written without spaces between words (CJK, kana, Hangul with its attached particles, Thai,
# Lao, Khmer, Myanmar, Tibetan): a term there is found anywhere, with no word-boundary test.
_SPACELESS = re.compile("[\u0e00-\u0fff\u1000-\u109f\u1780-\u17ff\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _occurs(term: str, text: str) -> bool:
    # Word-edged terms match whole words ("cat" is not in "concatenate"), as in the client's glossary.
    left = r"(?<!\w)" if _word_edge(term[:1]) else ""
    right = r"(?!\w)" if _word_edge(term[-1:]) else ""
    return re.search(left + re.escape(term) + right, text, flags=re.IGNORECASE) is not None


def _word_edge(char: str) -> bool:
    return (char.isalnum() or char == "_") and not _SPACELESS.match(char)

"""DeepL glossaries as data: entries read from TSV/CSV with DeepL's rules, the v2 and v3 JSON shapes."""

from __future__ import annotations

import csv
import datetime
import io
import uuid
from collections.abc import Sequence
from typing import Any

from hunyuan_serve.languages import LANGUAGES, UnknownLanguage
from hunyuan_serve.replica.apis import codes
from hunyuan_serve.storage.glossary import Dictionary, Glossary, Terms

FORMATS = ("tsv", "csv")
# DeepL's limit on each term and on the name: "limited to 1024 UTF-8 bytes" (developers.deepl.com,
# api-reference/glossaries). The size of the whole and the entry count are replica config fields.
MAX_TERM_BYTES = 1024


class EntriesInvalid(ValueError):
    """Entries or glossary fields DeepL would refuse; the message names the entry and the rule (a 400)."""


def glossary_language(code: Any, name: str) -> str:
    """A glossary's language as DeepL lists it: the base code, lowercase (EN-US and EN are both en)."""
    if not isinstance(code, str) or not code.strip():
        raise EntriesInvalid(f"Parameter '{name}' not specified.")
    try:
        return codes.deepl_source_code(codes.deepl_language(code)).lower()
    except UnknownLanguage:
        raise EntriesInvalid(f"Value for '{name}' not supported.") from None


def language_pairs() -> list[dict[str, str]]:
    """Every pair of two different languages (the model translates between any two of its languages)."""
    bases = list(dict.fromkeys(codes.deepl_source_code(lang).lower() for lang in LANGUAGES))
    return [{"source_lang": s, "target_lang": t} for s in bases for t in bases if s != t]


def _rows(text: str, entries_format: str) -> list[tuple[int, list[str]]]:
    """Each non-blank line's fields, numbered from 1 as DeepL numbers entries."""
    if entries_format == "tsv":
        lines = text.splitlines()
        return [(n, line.split("\t")) for n, line in enumerate(lines, 1) if line.strip()]
    try:
        return [(n, row) for n, row in enumerate(csv.reader(io.StringIO(text)), 1) if any(row)]
    except csv.Error as err:
        raise EntriesInvalid(f"Invalid glossary entries: the CSV is malformed ({err}).") from None


def check_term(term: str, where: str, max_chars: int) -> None:
    """DeepL's rules on one term (deepl-python util.validate_glossary_term, and the 1024-byte limit), and
    the replica's max_glossary_term_chars, so that a stored term is never refused at translate time."""
    if not term:
        raise EntriesInvalid(f"Invalid glossary entries: {where} is empty.")
    if any(ord(c) <= 31 or 128 <= ord(c) <= 159 or c in "\u2028\u2029" for c in term):
        raise EntriesInvalid(f"Invalid glossary entries: {where} holds a control character or line break.")
    if len(term) > max_chars:
        raise EntriesInvalid(f"Invalid glossary entries: {where} is longer than {max_chars} characters.")
    if len(term.encode("utf-8")) > MAX_TERM_BYTES:
        raise EntriesInvalid(f"Invalid glossary entries: {where} is over {MAX_TERM_BYTES} UTF-8 bytes.")


def parse_entries(
    text: Any,
    entries_format: Any,
    pair: tuple[str, str],
    max_entries: int,
    max_bytes: int,
    max_term_chars: int,
) -> Terms:
    """The entries of one dictionary, or EntriesInvalid naming the first problem (nothing is kept then).

    TSV: source TAB target a line. CSV: source,target[,source_lang,target_lang] a row, quoted as CSV is
    (developers.deepl.com "Supported glossary formats"); the optional languages must be the dictionary's.
    """
    fmt = "tsv" if entries_format is None or entries_format == "" else entries_format
    if fmt not in FORMATS:
        raise EntriesInvalid(f"Value for 'entries_format' not supported: send one of {', '.join(FORMATS)}.")
    if not isinstance(text, str) or not text.strip():
        raise EntriesInvalid("Parameter 'entries' not specified.")
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise EntriesInvalid(f"Glossary entries are {size} bytes; the limit is {max_bytes} bytes.")
    seen: dict[str, int] = {}
    entries: list[tuple[str, str]] = []
    for number, fields in _rows(text, fmt):
        source, target = _entry(fields, number, fmt, pair, max_term_chars)
        if source in seen:
            raise EntriesInvalid(
                f'Invalid glossary entries: entry {number} duplicates the source term "{source[:100]}" '
                f"of entry {seen[source]}."
            )
        seen[source] = number
        entries.append((source, target))
        if len(entries) > max_entries:
            raise EntriesInvalid(f"Glossary has more than {max_entries} entries (the limit).")
    if not entries:  # CSV rows of empty fields only (",", '""') are skipped as blank lines are
        raise EntriesInvalid("Invalid glossary entries: no entry found (every row is empty).")
    return tuple(entries)


def _entry(
    fields: list[str], number: int, fmt: str, pair: tuple[str, str], max_chars: int
) -> tuple[str, str]:
    sizes = (2,) if fmt == "tsv" else (2, 4)
    if len(fields) not in sizes:
        shape = "source<TAB>target" if fmt == "tsv" else "source,target[,source_lang,target_lang]"
        raise EntriesInvalid(f"Invalid glossary entries: entry {number} is not {shape}.")
    if len(fields) == 4:
        given = (glossary_language(fields[2], "source_lang"), glossary_language(fields[3], "target_lang"))
        if given != pair:
            raise EntriesInvalid(
                f"Invalid glossary entries: entry {number} is for {given[0]}->{given[1]}, "
                f"not the glossary's {pair[0]}->{pair[1]}."
            )
    source, target = fields[0].strip(), fields[1].strip()
    check_term(source, f"the source term of entry {number}", max_chars)
    check_term(target, f"the target term of entry {number}", max_chars)
    return source, target


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise EntriesInvalid("Parameter 'name' not specified.")
    if len(name.encode("utf-8")) > MAX_TERM_BYTES:
        raise EntriesInvalid(f"Value for 'name' is longer than {MAX_TERM_BYTES} UTF-8 bytes.")
    return name


def new_glossary(owner: str, name: str, dictionaries: Sequence[Dictionary]) -> Glossary:
    now = datetime.datetime.now(datetime.UTC)
    created = now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
    return Glossary(str(uuid.uuid4()), owner, name, created, tuple(dictionaries))


def v2_info(glossary: Glossary) -> dict[str, Any]:
    """The v2 shape: one language pair (a glossary made through v2 has one dictionary)."""
    first = glossary.dictionaries[0]
    return {
        "glossary_id": glossary.id,
        "name": glossary.name,
        "ready": True,
        "source_lang": first.source,
        "target_lang": first.target,
        "creation_time": glossary.created,
        "entry_count": len(first.entries),
    }


def v3_info(glossary: Glossary) -> dict[str, Any]:
    dictionaries = [
        {"source_lang": d.source, "target_lang": d.target, "entry_count": len(d.entries)}
        for d in glossary.dictionaries
    ]
    return {
        "glossary_id": glossary.id,
        "name": glossary.name,
        "dictionaries": dictionaries,
        "creation_time": glossary.created,
    }


def as_tsv(entries: Terms) -> str:
    return "\n".join(f"{source}\t{target}" for source, target in entries)


def dictionary_for(glossary: Glossary, source: str, target: str) -> Dictionary | None:
    return next((d for d in glossary.dictionaries if (d.source, d.target) == (source, target)), None)

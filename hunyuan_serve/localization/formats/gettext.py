"""gettext .po/.pot through polib: msgstr blocks edited in place; plurals and header set for the target."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import polib

from hunyuan_serve.localization.formats.base import Document, Edit, FormatError, Options, splice
from hunyuan_serve.localization.formats.msgfmt import msgfmt_check
from hunyuan_serve.localization.formats.po_syntax import check_po
from hunyuan_serve.text.placeholders import find_placeholders

# Plural-Forms of the service's 38 languages (gettext's and CLDR's rules), by language code.
PLURAL_FORMS: dict[str, str] = {
    **dict.fromkeys(
        ("zh", "zh-Hant", "ja", "ko", "th", "vi", "ms", "id", "km", "my", "bo", "yue", "tr"),
        "nplurals=1; plural=0;",
    ),
    **dict.fromkeys(
        ("en", "de", "it", "nl", "es", "pt", "gu", "ur", "te", "mr", "bn", "ta", "kk", "mn", "ug", "he"),
        "nplurals=2; plural=(n != 1);",
    ),
    **dict.fromkeys(("fr", "hi", "fa", "tl"), "nplurals=2; plural=(n > 1);"),
    **dict.fromkeys(
        ("ru", "uk"),
        "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20)"
        " ? 1 : 2);",
    ),
    "pl": "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);",
    "cs": "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;",
    "ar": "nplurals=6; plural=n==0 ? 0 : n==1 ? 1 : n==2 ? 2 : n%100>=3 && n%100<=10 ? 3"
    " : n%100>=11 ? 4 : 5;",
}
_FORMAT_FLAGS = re.compile(r"^[a-z-]+-format$")
_NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")


@dataclass(frozen=True)
class _Entry:
    """One entry to translate: its segments' indexes and where its msgstr block lies."""

    entry: polib.POEntry
    first: int  # index of its first segment (msgid; msgid_plural follows for plurals)
    block: tuple[int, int]  # offsets of its msgstr lines, without the last line ending
    msgid_line: int  # 0-based line of its msgctxt/msgid, where a flags line goes


def parse_po(content: str, options: Options) -> Document:
    """Entries without a translation (all of them with overwrite) are segments; msgctxt is their context."""
    po = _read(content)
    has_header = check_po(content) is not None
    lines = content.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    newline = "\r\n" if "\r\n" in content else "\n"
    segments: list[str] = []
    labels: list[str] = []
    contexts: list[str | None] = []
    entries: list[_Entry] = []
    for entry in po:
        if entry.obsolete or (entry.translated() and not options.overwrite):
            continue
        # polib numbers the file's first entry 0, not 1 (then the msgstr edit was made at the file's end).
        msgid_line = _entry_start(lines, max(entry.linenum - 1, 0))
        entries.append(_Entry(entry, len(segments), _msgstr_block(lines, starts, msgid_line), msgid_line))
        for text in (entry.msgid, entry.msgid_plural) if entry.msgid_plural else (entry.msgid,):
            segments.append(text)
            labels.append(f"line {msgid_line + 1}" + (f" ({entry.msgctxt})" if entry.msgctxt else ""))
            contexts.append(entry.msgctxt or None)
    nplurals = _nplurals(po, options.target)
    header = (
        _header_edits(content, lines, starts, po, options.target, newline)
        if has_header
        else _new_header(options.target, newline)
    )

    def rebuild(
        translations: Sequence[str],
        failed: frozenset[int],
        flagged: frozenset[int] = frozenset(),
        reviewed: frozenset[int] = frozenset(),
    ) -> str:
        edits = list(header)
        for item in entries:
            forms = range(item.first, item.first + (2 if item.entry.msgid_plural else 1))
            flags, written = _flag_edits(lines, starts, item, newline, forms, (failed, flagged, reviewed))
            edits.extend(flags)
            if written:
                texts = translations[forms.start : forms.stop]
                edits.append(Edit(*item.block, _msgstr_lines(item.entry, texts, nplurals, newline)))
        return splice(content, edits)

    return Document(
        "po",
        tuple(segments),
        tuple(labels),
        rebuild,
        tuple(contexts),
        validate=check_output,
        review=rebuild,
        review_state="#, fuzzy",
        settle=rebuild,
    )


def _read(content: str) -> polib.POFile:
    """The catalog as polib reads it; its refusal as a FormatError with its line."""
    try:
        return polib.pofile(content, wrapwidth=0)
    except (OSError, ValueError) as err:
        found = re.search(r"\s*\(line (\d+)\)", str(err))
        problem = str(err).replace(found.group(), "") if found else str(err)
        raise FormatError(problem, int(found.group(1)) if found else None) from None


def check_output(text: str) -> None:
    """A written catalog read back by the same grammar as the input, then by msgfmt --check itself."""
    check_po(text)
    msgfmt_check(text)


def _entry_start(lines: Sequence[str], index: int) -> int:
    """The line of the entry's msgctxt or msgid (polib counts an entry from its first comment)."""
    while index < len(lines) and not lines[index].lstrip().startswith(("msgctxt", "msgid")):
        index += 1
    return index


def _msgstr_block(lines: Sequence[str], starts: Sequence[int], index: int) -> tuple[int, int]:
    """Offsets of the msgstr lines (and their continuations) that follow the msgid at line index."""
    first = index
    while first < len(lines) and not lines[first].lstrip().startswith("msgstr"):
        first += 1
    if first == len(lines):
        raise FormatError("entry without msgstr", index + 1)
    last = first
    while last + 1 < len(lines) and lines[last + 1].lstrip().startswith(("msgstr", '"')):
        last += 1
    end = starts[last] + len(lines[last].rstrip("\r\n"))
    return starts[first], end


def _msgstr_lines(entry: polib.POEntry, texts: Sequence[str], nplurals: int, newline: str) -> str:
    if not entry.msgid_plural:
        return f'msgstr "{polib.escape(texts[0])}"'
    # Form 0 covers more than n == 1 in languages of three or more forms (Russian: 1, 21, 31...): there
    # the singular's translation serves only when it holds the same placeholders as the plural's.
    same = sorted(p.text for p in find_placeholders(entry.msgid)) == sorted(
        p.text for p in find_placeholders(entry.msgid_plural)
    )
    singular = nplurals == 2 or (nplurals > 2 and same)
    forms = [texts[0] if n == 0 and singular else texts[1] for n in range(nplurals)]
    return newline.join(f'msgstr[{n}] "{polib.escape(text)}"' for n, text in enumerate(forms))


def _fuzzy_edit(lines: Sequence[str], starts: Sequence[int], item: _Entry, newline: str) -> Edit:
    """Add `fuzzy` to the entry's flags line, or a flags line before its msgctxt/msgid."""
    index = item.msgid_line - 1
    while index >= 0 and lines[index].startswith("#"):
        if lines[index].startswith("#,"):
            end = starts[index] + len(lines[index].rstrip("\r\n"))
            return Edit(end, end, ", fuzzy")
        index -= 1
    at = starts[item.msgid_line]
    return Edit(at, at, "#, fuzzy" + newline)


def _flag_edits(
    lines: Sequence[str],
    starts: Sequence[int],
    item: _Entry,
    newline: str,
    forms: range,
    marks: tuple[frozenset[int], frozenset[int], frozenset[int]],
) -> tuple[list[Edit], bool]:
    """The entry's flags line edits for its translation (failed, flagged, reviewed: a person's), and
    whether its msgstr is written (not when its translation failed)."""
    failed, flagged, reviewed = marks
    # Flags are a set: an entry that is fuzzy already (a rerun on our own output) stays so.
    fuzzy = "fuzzy" in item.entry.flags
    if any(i in failed for i in forms):
        if not fuzzy and any(_FORMAT_FLAGS.match(flag) for flag in item.entry.flags):
            return [_fuzzy_edit(lines, starts, item, newline)], False
        return [], False
    if not fuzzy and any(i in flagged for i in forms):  # written, for a translator to review
        return [_fuzzy_edit(lines, starts, item, newline)], True
    if fuzzy and all(i in reviewed and i not in flagged for i in forms):  # a person's: reviewed
        return _settled_edit(lines, starts, item), True
    return [], True


def _settled_edit(lines: Sequence[str], starts: Sequence[int], item: _Entry) -> list[Edit]:
    """`fuzzy` taken out of the entry's flags line (the line gone when it held no other flag)."""
    index = item.msgid_line - 1
    while index >= 0 and lines[index].startswith("#"):
        if lines[index].startswith("#,"):
            kept = [f.strip() for f in lines[index][2:].split(",") if f.strip() not in ("fuzzy", "")]
            end = starts[index] + len(lines[index].rstrip("\r\n"))
            if kept:
                return [Edit(starts[index], end, "#, " + ", ".join(kept))]
            return [Edit(starts[index], starts[index] + len(lines[index]), "")]
        index -= 1
    return []


def _nplurals(po: polib.POFile, target: str | None) -> int:
    forms = PLURAL_FORMS.get(target or "") or po.metadata.get("Plural-Forms", "")
    found = _NPLURALS.search(forms)
    return int(found.group(1)) if found else 2


def _header_edits(
    content: str,
    lines: Sequence[str],
    starts: Sequence[int],
    po: polib.POFile,
    target: str | None,
    newline: str,
) -> list[Edit]:
    """Language and Plural-Forms set for the target in the header (only where they differ)."""
    header_line = _header_line(lines)  # polib keeps the header out of its entries
    if target is None or header_line is None:
        return []
    start, end = _msgstr_block(lines, starts, header_line)
    wanted = {
        "Language": target,
        **({"Plural-Forms": PLURAL_FORMS[target]} if target in PLURAL_FORMS else {}),
    }
    edits: list[Edit] = []
    block = content[start:end]
    for key, value in wanted.items():
        if po.metadata.get(key) == value:
            continue
        found = re.search(rf'^"{key}:[^\n]*"\r?$', block, re.M)
        line = f'"{key}: {polib.escape(value)}\\n"'
        if found:
            edits.append(
                Edit(
                    start + found.start(),
                    start + found.end() - (1 if found.group().endswith("\r") else 0),
                    line,
                )
            )
        else:
            edits.append(Edit(end, end, newline + line))
    return edits


def _new_header(target: str | None, newline: str) -> list[Edit]:
    """A header for a catalog without one (msgfmt --check refuses those): charset, target, its plurals."""
    if target is None:
        return []
    fields = ["Content-Type: text/plain; charset=UTF-8", f"Language: {target}"]
    fields += [f"Plural-Forms: {PLURAL_FORMS[target]}"] if target in PLURAL_FORMS else []
    block = ['msgid ""', 'msgstr ""', *(f'"{polib.escape(field)}\\n"' for field in fields)]
    return [Edit(0, 0, newline.join(block) + newline + newline)]


def _header_line(lines: Sequence[str]) -> int | None:
    """The line of the header's `msgid ""` (the first entry, with an empty msgid)."""
    for index, line in enumerate(lines):
        if line.startswith("msgid "):
            is_header = line.strip() == 'msgid ""' and not (
                index + 1 < len(lines) and lines[index + 1].startswith('"')
            )
            return index if is_header else None
    return None

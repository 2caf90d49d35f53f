"""The CSV and TSV pairs people keep (source, target a row): read into units, written from them."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable

from hunyuan_serve.memory.tmx import MemoryFile, MemoryFileInvalid, language_code, read_tmx, write_tmx
from hunyuan_serve.storage.memory import Unit

FORMATS = ("tmx", "csv", "tsv")
# Characters XML 1.0 cannot carry (its Char production): a unit holding one could never be exported.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def memory_format(name: str, given: str | None) -> str:
    """The format asked for, else the file name's extension; MemoryFileInvalid when it is none of FORMATS."""
    fmt = (given or (name.rsplit(".", 1)[-1] if "." in name else "")).strip().lower()
    if fmt not in FORMATS:
        raise MemoryFileInvalid(f"memory file format {fmt or '(none)'!r}: send one of {', '.join(FORMATS)}")
    return fmt


def read_pairs(
    data: bytes, fmt: str, src: str | None, tgt: str | None, keep_blank: bool = False
) -> MemoryFile:
    """Rows of `source, target` (two columns), or `source, target, source_lang, target_lang` (four);
    two columns need the file's languages given. A blank row is skipped; a bad one names its line. An
    empty target is a source not translated yet (left out) unless keep_blank: then a translation that
    leaves the text out, as SD WebUI's localization files hide a string."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise MemoryFileInvalid(f"{fmt.upper()} is not UTF-8 (byte {err.start})") from None
    reader = csv.reader(io.StringIO(text), delimiter="\t" if fmt == "tsv" else ",")
    units: list[Unit] = []
    try:
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            if len(row) not in (2, 4):
                raise MemoryFileInvalid(_columns(fmt, reader.line_num, len(row)))
            if not row[1] and not keep_blank:
                continue  # a source not translated yet pairs nothing; " " is a person's choice
            units.append(_unit(row, reader.line_num, fmt, src, tgt))
    except csv.Error as err:
        raise MemoryFileInvalid(f"{fmt.upper()} line {reader.line_num}: {err}") from None
    return MemoryFile(units)


def _unit(row: list[str], line: int, fmt: str, src: str | None, tgt: str | None) -> Unit:
    where = f"{fmt.upper()} line {line}"
    if len(row) == 4:
        src, tgt = row[2], row[3]
    if not src or not tgt:
        raise MemoryFileInvalid(f"{where}: no languages: give source_lang and target_lang for the file")
    if not row[0].strip():
        raise MemoryFileInvalid(f"{where}: a target without a source")
    if _NOT_XML.search(row[0] + row[1]):
        raise MemoryFileInvalid(f"{where}: a control character, which no XML (so no TMX export) can hold")
    return Unit(language_code(src), language_code(tgt), row[0], row[1])


def _columns(fmt: str, line: int, count: int) -> str:
    return f"{fmt.upper()} line {line}: {count} columns; want source,target[,source_lang,target_lang]"


def read_memory_file(
    data: bytes, fmt: str, src: str | None = None, tgt: str | None = None, keep_blank: bool = False
) -> MemoryFile:
    """A memory file of any of FORMATS; the languages given apply to CSV/TSV rows of two columns;
    keep_blank keeps the units whose target is empty (a translation that leaves the text out)."""
    return read_tmx(data, keep_blank) if fmt == "tmx" else read_pairs(data, fmt, src, tgt, keep_blank)


def write_memory_file(units: Iterable[Unit], fmt: str) -> bytes:
    """Units as a file of the format: TMX 1.4b, or four-column CSV/TSV rows (languages in each row)."""
    if fmt == "tmx":
        return write_tmx(units)
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
    writer.writerows((u.source, u.target, u.src, u.tgt) for u in units)
    return out.getvalue().encode("utf-8")

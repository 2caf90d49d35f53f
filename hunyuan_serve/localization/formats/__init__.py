"""Localization file formats: each read into segments and written back with only the translations changed."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from typing import Any

from hunyuan_serve.localization.formats.base import Document, FormatError, Options, decode, encode
from hunyuan_serve.localization.formats.jsonfile import parse_json
from hunyuan_serve.localization.formats.plain import parse_text

__all__ = [
    "FORMATS",
    "Document",
    "FormatError",
    "Options",
    "decode",
    "describe_formats",
    "detect_format",
    "encode",
    "extensions",
    "fallback_encoding",
    "parse",
    "parse_json",
    "parse_text",
    "read_file",
]


@dataclass(frozen=True)
class FormatInfo:
    """A format: its name (--format), the extensions that select it, and the function that parses it."""

    name: str
    extensions: tuple[str, ...]
    description: str
    parser: str  # "module:function" under this package, imported on first use (keeps the CLI start fast)
    fallback_encoding: str | None = None  # what a file that is not UTF-8 is read as
    binary: bool = False  # its parser takes the file's bytes, and its document renders bytes


FORMATS: dict[str, FormatInfo] = {
    info.name: info
    for info in (
        FormatInfo("text", (".txt", ".text"), "plain text, a segment a line", "plain:parse_text_options"),
        FormatInfo(
            "json",
            (".json",),
            "JSON object of strings, flat or nested; i18next plurals per target",
            "jsonfile:parse_json_options",
        ),
        FormatInfo(
            "arb", (".arb",), "Flutter ARB: messages, @metadata kept, @@locale set", "jsonfile:parse_arb"
        ),
        FormatInfo(
            "yaml",
            (".yml", ".yaml"),
            "YAML locale files (Rails): values, root locale key",
            "yamlfile:parse_yaml",
        ),
        FormatInfo("po", (".po", ".pot"), "gettext catalog: plurals, msgctxt, flags", "gettext:parse_po"),
        FormatInfo(
            "android",
            ("strings.xml",),
            "Android string resources: arrays, plurals per target",
            "android:parse_android",
        ),
        FormatInfo(
            "xliff", (".xlf", ".xliff"), "XLIFF 1.2 and 2.0: targets and their state", "xliff:parse_xliff"
        ),
        FormatInfo(
            "properties",
            (".properties",),
            "Java properties: values, escapes as the file has them",
            "properties:parse_properties",
            "latin-1",  # what java.util.Properties.load reads
        ),
        FormatInfo("strings", (".strings",), "Apple .strings: values, comments kept", "apple:parse_strings"),
        FormatInfo(
            "stringsdict", (".stringsdict",), "Apple .stringsdict: plural forms", "apple:parse_stringsdict"
        ),
        FormatInfo(
            "xcstrings",
            (".xcstrings",),
            "Apple String Catalog: stringUnits, plural variations",
            "xcstrings:parse_xcstrings",
        ),
        FormatInfo("srt", (".srt",), "SubRip subtitles: numbering and timings kept", "subtitles:parse_srt"),
        FormatInfo(
            "vtt", (".vtt",), "WebVTT subtitles: header, notes, styles, timings kept", "subtitles:parse_vtt"
        ),
        FormatInfo(
            "markdown",
            (".md", ".markdown"),
            "Markdown: prose only, sentence by sentence",
            "markdown:parse_markdown",
        ),
        FormatInfo(
            "html", (".html", ".htm"), "HTML: text, alt and title; code and scripts kept", "html:parse_html"
        ),
        FormatInfo(
            "docx",
            (".docx",),
            "Word: paragraphs and table cells; styles kept",
            "word:parse_docx",
            binary=True,
        ),
    )
}
Format = str


def describe_formats() -> str:
    """One line per format, for --help."""
    return "\n".join(f"  {i.name:<12} {' '.join(i.extensions):<16} {i.description}" for i in FORMATS.values())


def extensions() -> list[str]:
    """Every name ending a format takes, sorted (".po", and "strings.xml", Android's whole name's end)."""
    return sorted({ending for info in FORMATS.values() for ending in info.extensions})


def detect_format(name: str | None, content: str) -> Format:
    """The format its extension names; else, for a name without one (or stdin), JSON for content that
    parses as an object, else text. An extension no format takes is a FormatError naming those taken:
    read as text, a binary file or another format would be sent as lines and written back mangled."""
    named = _named(name)
    if named is not None:
        return named.name
    lower = (name or "").lower()
    if lower.endswith(".xml"):  # values/arrays.xml and the like, or XLIFF saved as .xml: the root says
        head = content[:2000]
        if "<xliff" in head or "<resources" in head:
            return "xliff" if "<xliff" in head else "android"
    _refuse_unknown(name)
    if content.lstrip().startswith("{"):
        try:
            return "json" if isinstance(json.loads(content), dict) else "text"
        except json.JSONDecodeError:
            return "text"
    return "text"


def _refuse_unknown(name: str | None) -> None:
    """A FormatError for a name whose extension no format takes (none at all is not refused)."""
    extension = _extension(name or "")
    if extension and _named(name) is None:
        raise FormatError(
            f"the extension '{extension}' is not one of the formats' (supported: {' '.join(extensions())}"
            ", and .xml holding XLIFF or Android resources); --format names the one to read it as"
        )


def _extension(name: str) -> str:
    """The name's extension ('.md'), '' for none; a leading dot (".env") starts a name, not one."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    dot = base.rfind(".")
    return base[dot:].lower() if dot > 0 else ""


def fallback_encoding(name: str | None, fmt: Format) -> str | None:
    """The encoding a non-UTF-8 input of this format (given, or from the name) is read as, if any."""
    info = FORMATS.get(fmt) if fmt != "auto" else _named(name)
    return info.fallback_encoding if info else None


def parse(content: str, fmt: Format, options: Options | None = None) -> Document:
    """content read as fmt; an unknown fmt is a FormatError naming the supported ones."""
    info = FORMATS.get(fmt)
    if info is None:
        raise FormatError(f"unknown format {fmt!r}; supported: {', '.join(FORMATS)}")
    if info.binary:
        raise FormatError(f"{fmt} is read from the file's bytes (read_file), not from text")
    document: Document = _parser(info)(content, options or Options())
    return document


def read_file(data: bytes, name: str | None, fmt: Format, options: Options) -> tuple[Any, str]:
    """(document, encoding) of a file's bytes in fmt ("auto": its name's, else its content's); a
    FormatError names what is wrong. A binary format's document (.docx) renders bytes (encoding "")."""
    if fmt == "auto" and not (name or "").lower().endswith(".xml"):
        _refuse_unknown(name)  # before decoding: a .pdf is refused for its name, not as "not UTF-8"
    info = _named(name) if fmt == "auto" else FORMATS.get(fmt)
    if info is not None and info.binary:
        return _parser(info)(data, options), ""
    content, encoding = decode(data, fallback_encoding(name, fmt))
    return parse(content, detect_format(name, content) if fmt == "auto" else fmt, options), encoding


def _named(name: str | None) -> FormatInfo | None:
    """The format the name's ending selects, if one does (a bare .xml needs its content read)."""
    lower = (name or "").lower()
    return next((info for info in FORMATS.values() if lower.endswith(info.extensions)), None)


def _parser(info: FormatInfo) -> Any:
    module, function = info.parser.split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)

"""Localization file formats: each read into segments and written back with only the translations changed."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass

from hunyuan_serve.client.formats.base import Document, FormatError, Options, decode, encode
from hunyuan_serve.client.formats.jsonfile import parse_json
from hunyuan_serve.client.formats.plain import parse_text

__all__ = [
    "FORMATS",
    "Document",
    "FormatError",
    "Options",
    "decode",
    "describe_formats",
    "detect_format",
    "encode",
    "fallback_encoding",
    "parse",
    "parse_json",
    "parse_text",
]


@dataclass(frozen=True)
class FormatInfo:
    """A format: its name (--format), the extensions that select it, and the function that parses it."""

    name: str
    extensions: tuple[str, ...]
    description: str
    parser: str  # "module:function" under this package, imported on first use (keeps the CLI start fast)
    fallback_encoding: str | None = None  # what a file that is not UTF-8 is read as


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
    )
}
Format = str


def describe_formats() -> str:
    """One line per format, for --help."""
    return "\n".join(f"  {i.name:<12} {' '.join(i.extensions):<16} {i.description}" for i in FORMATS.values())


def detect_format(name: str | None, content: str) -> Format:
    """The format its extension names; else JSON for content that parses as an object; else text."""
    lower = (name or "").lower()
    for info in FORMATS.values():
        if lower.endswith(info.extensions):
            return info.name
    if lower.endswith(".xml"):  # values/arrays.xml and the like, or XLIFF saved as .xml: the root says
        head = content[:2000]
        return "xliff" if "<xliff" in head else "android" if "<resources" in head else "text"
    if content.lstrip().startswith("{"):
        try:
            return "json" if isinstance(json.loads(content), dict) else "text"
        except json.JSONDecodeError:
            return "text"
    return "text"


def fallback_encoding(name: str | None, fmt: Format) -> str | None:
    """The encoding a non-UTF-8 input of this format (given, or from the name) is read as, if any."""
    info = FORMATS.get(fmt) if fmt != "auto" else FORMATS.get(detect_format(name, ""))
    return info.fallback_encoding if info else None


def parse(content: str, fmt: Format, options: Options | None = None) -> Document:
    """content read as fmt; an unknown fmt is a FormatError naming the supported ones."""
    info = FORMATS.get(fmt)
    if info is None:
        raise FormatError(f"unknown format {fmt!r}; supported: {', '.join(FORMATS)}")
    module, function = info.parser.split(":")
    parser = getattr(importlib.import_module(f"{__name__}.{module}"), function)
    document: Document = parser(content, options or Options())
    return document

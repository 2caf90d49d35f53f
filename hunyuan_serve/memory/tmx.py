"""TMX 1.4b read (the dialects real tools write) and written, units in the service's language codes."""

from __future__ import annotations

import datetime
import io
from collections.abc import Iterable
from dataclasses import dataclass

from lxml import etree

from hunyuan_serve import __version__
from hunyuan_serve.languages import UnknownLanguage, find_language
from hunyuan_serve.storage.memory import Unit

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
# The TMX 1.4b DTD's public identifier and system name (the DTD itself: LISA OSCAR, tmx14.dtd).
DOCTYPE = '<!DOCTYPE tmx SYSTEM "tmx14.dtd">'
CREATION_TOOL = "hunyuan-serve"


class MemoryFileInvalid(ValueError):
    """A memory file that cannot be read as its format says; the message names the line (a 400)."""


@dataclass(frozen=True)
class MemoryFile:
    """The units of a file, and the tool that wrote it when the file says."""

    units: list[Unit]
    tool: str = ""


def language_code(code: str) -> str:
    """A file's language tag as the service spells it (en-US and en_US are en), else the tag lowercased."""
    try:
        return find_language(code).code
    except UnknownLanguage:
        return code.strip().replace("_", "-").lower()


def segment_text(seg: etree._Element) -> str:
    """A <seg>'s text as it stood in the document: inline codes (<ph>, <bpt>, <ept>, <it>, <ut>) hold
    the native markup they stand for, so their text is part of it; <hi> and <sub> hold text."""
    return "".join(seg.itertext())


def read_tmx(data: bytes, keep_blank: bool = False) -> MemoryFile:
    """Every pair of the source variant with each other variant of each <tu>; MemoryFileInvalid names the
    line of the first problem (nothing is read then). Entities are not expanded, nothing is fetched.
    An empty target <seg> is a unit not translated yet (translate-toolkit, so Weblate, exports those
    so) unless keep_blank: then a translation set empty on purpose (OmegaT's "empty translation")."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True)
    try:
        root = etree.parse(io.BytesIO(data), parser).getroot()
    except etree.XMLSyntaxError as err:
        line = err.lineno or (err.position[0] if err.position else 0)
        raise MemoryFileInvalid(f"TMX line {line}: not well-formed XML: {err.msg}") from None
    if root.tag != "tmx":
        raise MemoryFileInvalid(f"TMX line {root.sourceline}: the root element is <{root.tag}>, not <tmx>")
    header, body = root.find("header"), root.find("body")
    if header is None or body is None:
        raise MemoryFileInvalid(f"TMX line {root.sourceline}: <tmx> needs a <header> and a <body>")
    srclang = header.get("srclang", "").strip()
    if not srclang:
        raise MemoryFileInvalid(f"TMX line {header.sourceline}: <header> has no srclang")
    units: list[Unit] = []
    for tu in body.iter("tu"):
        units.extend(_tu_units(tu, tu.get("srclang", srclang), keep_blank))
    return MemoryFile(units, header.get("creationtool", ""))


def _tu_units(tu: etree._Element, srclang: str, keep_blank: bool) -> list[Unit]:
    variants: list[tuple[str, str]] = []
    for tuv in tu.findall("tuv"):
        lang = tuv.get(XML_LANG) or tuv.get("lang")  # lang: TMX 1.1's spelling, kept by old exports
        if not lang:
            raise MemoryFileInvalid(f"TMX line {tuv.sourceline}: <tuv> has no xml:lang")
        seg = tuv.find("seg")
        if seg is None:
            raise MemoryFileInvalid(f"TMX line {tuv.sourceline}: <tuv> has no <seg>")
        variants.append((language_code(lang), segment_text(seg)))
    if not variants:
        raise MemoryFileInvalid(f"TMX line {tu.sourceline}: <tu> has no <tuv>")
    # srclang="*all*": any variant may be the source; the first one is taken, as OmegaT writes them.
    src = variants[0][0] if srclang == "*all*" else language_code(srclang)
    sources = [text for lang, text in variants if lang == src]
    if not sources or not sources[0].strip():
        return []  # a unit without the source language (or an empty one) pairs nothing
    source = sources[0]
    return [Unit(src, lang, source, text) for lang, text in variants if lang != src and (text or keep_blank)]


def write_tmx(units: Iterable[Unit], srclang: str = "*all*") -> bytes:
    """A TMX 1.4b document (level 1: plain text segments), valid against tmx14.dtd, one <tu> a unit."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    root = etree.Element("tmx", version="1.4")
    etree.SubElement(
        root,
        "header",
        creationtool=CREATION_TOOL,
        creationtoolversion=__version__,
        segtype="sentence",
        **{"o-tmf": CREATION_TOOL, "adminlang": "en", "srclang": srclang, "datatype": "plaintext"},
        creationdate=now,
    )
    body = etree.SubElement(root, "body")
    for unit in units:
        tu = etree.SubElement(body, "tu", srclang=unit.src)
        for lang, text in ((unit.src, unit.source), (unit.tgt, unit.target)):
            tuv = etree.SubElement(tu, "tuv", {XML_LANG: lang})
            etree.SubElement(tuv, "seg").text = text
    return etree.tostring(root, encoding="UTF-8", xml_declaration=True, doctype=DOCTYPE, pretty_print=True)

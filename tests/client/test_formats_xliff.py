"""XLIFF 1.2 and 2.0 through `translate`: Symfony's file kept byte for byte, targets and state, notes kept."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import FormatError, Options, parse
from tests.support.scripted_service import ScriptedService

SYMFONY = Path(__file__).resolve().parents[1] / "data" / "symfony" / "sf_form.fr.xlf"
NS12 = "{urn:oasis:names:tc:xliff:document:1.2}"
NS20 = "{urn:oasis:names:tc:xliff:document:2.0}"
XLIFF12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en" datatype="plaintext" original="app">
    <body>
      <trans-unit id="greet">
        <source>Hello <g id="1">%s</g> &amp; welcome</source>
        <note>Shown on the home page</note>
      </trans-unit>
      <trans-unit id="brand" translate="no"><source>Hunyuan</source></trans-unit>
      <trans-unit id="bye"><source>Bye</source><target state="new"/></trans-unit>
      <trans-unit id="done"><source>Done</source><target state="final">Fertig</target></trans-unit>
    </body>
  </file>
</xliff>
"""
XLIFF20 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en">
  <file id="f1">
    <unit id="u1">
      <notes><note>keep me</note></notes>
      <segment>
        <source>Open the file</source>
      </segment>
    </unit>
    <unit id="u2"><segment state="initial"><source>Close</source><target></target></segment></unit>
  </file>
</xliff>
"""


def run(service: ScriptedService, tmp_path: Path, src: Path, *args: str) -> tuple[int, Path, dict]:
    dst, report = tmp_path / f"out{src.suffix}", tmp_path / "report.json"
    flags = ["--no-cache", "--no-progress", "--report", str(report)]
    code = main(["--url", service.url, "--from", "en", *args, str(src), "-o", str(dst), *flags])
    return code, dst, json.loads(report.read_text()) if report.exists() else {}


def test_symfony_file_kept_byte_identical(service: ScriptedService, tmp_path: Path) -> None:
    code, dst, report = run(service, tmp_path, SYMFONY, "--to", "fr")
    assert code == 0 and report["total"] == 0 and dst.read_bytes() == SYMFONY.read_bytes()


def test_symfony_file_overwritten_sets_state_and_language(service: ScriptedService, tmp_path: Path) -> None:
    code, dst, _ = run(service, tmp_path, SYMFONY, "--to", "fr", "--overwrite")
    assert code == 0
    root = ET.parse(dst).getroot()
    file = root.find(f"{NS12}file")
    assert file is not None and file.get("target-language") == "fr"
    target = root.find(f".//{NS12}target")
    assert (
        target is not None
        and target.text == "[fr] No choice available"
        and target.get("state") == "translated"
    )
    assert (
        dst.read_text()
        .replace(' target-language="fr"', "")
        .replace('<target state="translated">[fr] No choice available', "<target>Aucun choix disponible")
        == SYMFONY.read_text()
    )


def test_xliff12_targets_added_notes_and_untranslatable_kept(
    service: ScriptedService, tmp_path: Path
) -> None:
    src = tmp_path / "app.xlf"
    src.write_text(XLIFF12, encoding="utf-8")
    code, dst, report = run(service, tmp_path, src, "--to", "zh")
    assert code == 0 and report["total"] == 2
    units = {u.get("id"): u for u in ET.parse(dst).getroot().iter(f"{NS12}trans-unit")}
    greet = units["greet"].find(f"{NS12}target")
    assert greet is not None and greet.get("state") == "translated"
    assert ET.tostring(greet, encoding="unicode").split(">", 1)[1].startswith("[zh] Hello <ns0:g")
    assert units["greet"].findtext(f"{NS12}note") == "Shown on the home page"
    assert units["brand"].find(f"{NS12}target") is None
    assert units["bye"].findtext(f"{NS12}target") == "[zh] Bye"
    assert units["done"].findtext(f"{NS12}target") == "Fertig"  # translated already: kept
    assert 'Hello <g id="1">%s</g> &amp; welcome' in service.state.sent_texts()


def test_xliff20_segment_state_and_trglang(service: ScriptedService, tmp_path: Path) -> None:
    src = tmp_path / "app.xliff"
    src.write_text(XLIFF20, encoding="utf-8")
    code, dst, report = run(service, tmp_path, src, "--to", "fr")
    assert code == 0 and report["total"] == 2
    root = ET.parse(dst).getroot()
    assert root.get("trgLang") == "fr"
    segments = list(root.iter(f"{NS20}segment"))
    assert [s.get("state") for s in segments] == ["translated", "translated"]
    assert [s.findtext(f"{NS20}target") for s in segments] == ["[fr] Open the file", "[fr] Close"]
    assert root.findtext(f".//{NS20}note") == "keep me"


def test_malformed_xliff_names_the_line() -> None:
    with pytest.raises(FormatError) as caught:
        parse('<xliff version="1.2">\n<file>\n<body></file>\n</xliff>', "xliff", Options())
    assert caught.value.line == 3


def test_stray_markup_characters_in_a_translation_keep_the_xml_well_formed() -> None:
    doc = parse(XLIFF12, "xliff", Options(target="de"))
    out = doc.render(['Hallo <g id="1">%s</g> &amp; a < b', "Tschüss"])
    assert ET.fromstring(out.encode()) is not None and "&amp; a &lt; b</target>" in out


def test_a_unit_whose_translation_failed_gets_its_source_for_review_and_is_tried_again() -> None:
    doc = parse(XLIFF12, "xliff", Options(target="de"))
    out = doc.render(["Hallo ohne Platzhalter", "Tschüss"], failed=frozenset({0}))
    greet = ET.fromstring(out.encode()).find(f".//{NS12}trans-unit[@id='greet']/{NS12}target")
    assert greet is not None and greet.get("state") == "needs-review-translation"
    assert (
        ET.tostring(greet, encoding="unicode").split(">", 1)[1].startswith('Hello <ns0:g id="1">%s</ns0:g>')
    )
    # The next run sends it again (a copy for review is not a translation); the finished one is kept.
    again = parse(out, "xliff", Options(target="de"))
    assert again.segments == ('Hello <g id="1">%s</g> &amp; welcome',)


def test_xliff20_has_no_review_state_so_a_failed_unit_is_left_as_it_was() -> None:
    doc = parse(XLIFF20, "xliff", Options(target="fr"))
    out = doc.render(["Ouvrir le fichier", "Fermer"], failed=frozenset({0}))
    segments = list(ET.fromstring(out.encode()).iter(f"{NS20}segment"))
    assert [s.get("state") for s in segments] == [None, "translated"]
    assert [s.findtext(f"{NS20}target") for s in segments] == [None, "Fermer"]

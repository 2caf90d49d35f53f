"""Android strings.xml through `translate`: AOSP Calculator byte-identical, escapes, arrays, plurals."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import FormatError, Options, detect_format, parse
from tests.support.scripted_service import ScriptedService

CALCULATOR = Path(__file__).resolve().parents[1] / "data" / "aosp-calculator" / "strings.xml"
RESOURCES = """<?xml version="1.0" encoding="utf-8"?>
<resources xmlns:xliff="urn:oasis:names:tc:xliff:document:1.2">
    <!-- kept -->
    <string name="app" translatable="false">Calculator</string>
    <string name="euler">Euler\\'s number</string>
    <string-array name="planets">
        <item>Mercury</item>
        <item><![CDATA[<b>Venus</b> & Earth]]></item>
    </string-array>
    <string-array name="codes" translatable="false"><item>en</item></string-array>
    <plurals name="songs">
        <item quantity="one">%1$d song</item>
        <item quantity="other">%1$d songs by <xliff:g id="artist">%2$s</xliff:g></item>
    </plurals>
    <string name="empty"/>
</resources>
"""


def run(service: ScriptedService, tmp_path: Path, src: Path) -> tuple[int, Path, dict]:
    dst, report = tmp_path / "values-zh" / "strings.xml", tmp_path / "report.json"
    dst.parent.mkdir(exist_ok=True)
    flags = ["--no-cache", "--no-progress", "--report", str(report)]
    code = main(["--url", service.url, "--from", "en", "--to", "zh", str(src), "-o", str(dst), *flags])
    return code, dst, json.loads(report.read_text()) if report.exists() else {}


def shape(path: Path) -> list[tuple[str, dict[str, str]]]:
    """Every element and its attributes, in order: what translation must not change."""
    return [(e.tag, dict(e.attrib)) for e in ET.parse(path).iter()]


def test_aosp_calculator_through_identity_is_byte_identical(service: ScriptedService, tmp_path: Path) -> None:
    service.state.translate = lambda text, target: text
    code, dst, report = run(service, tmp_path, CALCULATOR)
    assert code == 0 and report["total"] == 30 and report["translated"] == 30
    assert "Euler's number" in service.state.sent_texts()  # the \' escape is undone for the model...
    assert dst.read_bytes() == CALCULATOR.read_bytes()  # ...and written back as it was


def test_aosp_calculator_translated_keeps_structure_and_escapes(
    service: ScriptedService, tmp_path: Path
) -> None:
    code, dst, _ = run(service, tmp_path, CALCULATOR)
    assert code == 0 and shape(dst) == shape(CALCULATOR)
    text = dst.read_text(encoding="utf-8")
    assert '<string name="desc_const_e">[zh] Euler\\\'s number</string>' in text
    assert (
        "<!-- Content description for 'e' button. [CHAR_LIMIT=NONE] -->" in text and "<eat-comment />" in text
    )


def test_arrays_plurals_cdata_and_untranslatable(service: ScriptedService, tmp_path: Path) -> None:
    src = tmp_path / "strings.xml"
    src.write_text(RESOURCES, encoding="utf-8")
    code, dst, report = run(service, tmp_path, src)
    assert code == 0 and report["total"] == 5
    # Chinese has one plural category: the "one" item goes, all else keeps its shape.
    assert shape(dst) == [s for s in shape(src) if s != ("item", {"quantity": "one"})]
    root = ET.parse(dst).getroot()
    assert root.find("string[@name='app']").text == "Calculator"  # type: ignore[union-attr]
    items = [item.text for item in root.iterfind("string-array[@name='planets']/item")]
    assert items == ["[zh] Mercury", "[zh] <b>Venus</b> & Earth"]  # CDATA kept as CDATA
    assert "<item><![CDATA[[zh] <b>Venus</b> & Earth]]></item>" in dst.read_text()
    assert root.find("string-array[@name='codes']/item").text == "en"  # type: ignore[union-attr]
    other = root.find("plurals/item[@quantity='other']")
    assert other is not None and other.text == "[zh] %1$d songs by "
    assert other[0].attrib == {"id": "artist"} and other[0].text == "%2$s"
    assert "Euler\\'s" not in service.state.sent_texts()


def test_translation_with_quotes_and_ampersand_is_escaped_for_aapt() -> None:
    doc = parse('<resources><string name="a">x</string></resources>', "android", Options())
    out = doc.render(['It\'s "A & B" <now>'])
    assert out == '<resources><string name="a">It\\\'s \\"A &amp; B\\" &lt;now&gt;</string></resources>'
    assert doc.render(["@home"]) == '<resources><string name="a">\\@home</string></resources>'


def test_malformed_xml_names_the_line() -> None:
    with pytest.raises(FormatError) as caught:
        parse('<resources>\n<string name="a">x</strin>\n</resources>', "android", Options())
    assert caught.value.line == 2 and "mismatched tag" in str(caught.value)


def test_detected_from_the_file_name() -> None:
    assert detect_format("app/src/main/res/values/strings.xml", "") == "android"
    assert detect_format("res/values/arrays.xml", '<?xml version="1.0"?>\n<resources>') == "android"
    assert detect_format("messages.xml", '<xliff version="1.2">') == "xliff"


def test_stray_markup_characters_in_a_translation_keep_the_xml_well_formed() -> None:
    src = '<resources><string name="a">Tap <b>Save</b> &amp; go</string></resources>'
    doc = parse(src, "android", Options())
    out = doc.render(["Tippe <b>Speichern</b> &amp; los, 1 < 2 & 3"])
    assert '<string name="a">Tippe <b>Speichern</b> &amp; los, 1 &lt; 2 &amp; 3</string>' in out
    assert ET.fromstring(out).find("string") is not None


def test_plurals_get_the_targets_quantities() -> None:
    doc = parse(RESOURCES, "android", Options(target="ru"))
    out = doc.render([f"[ru] {text}" for text in doc.segments])
    items = ET.fromstring(out).findall("plurals/item")
    assert [item.attrib["quantity"] for item in items] == ["one", "other", "few", "many"]
    # Russian "one" also reads 21, 31...: "%1$d song" lacks the artist, so it is the "other" form's.
    assert all(item.text == "[ru] %1$d songs by " and item[0].text == "%2$s" for item in items)
    assert '    <item quantity="other">[ru] %1$d songs by <xliff:g id="artist">%2$s</xliff:g></item>\n' in out
    same = parse(RESOURCES, "android", Options(target="de"))
    assert same.render(list(same.segments)) == RESOURCES  # German has English's two: nothing changes


def test_lost_positional_placeholder_is_refused(service: ScriptedService, tmp_path: Path) -> None:
    src = tmp_path / "strings.xml"
    src.write_text('<resources><string name="n">%1$d of %2$s</string></resources>', encoding="utf-8")
    service.state.translate = lambda text, target: text.replace("%1$d", "")
    code, dst, report = run(service, tmp_path, src)
    assert code == 1 and "missing '%1$d'" in report["failures"][0]["problem"]
    assert dst.read_text(encoding="utf-8") == src.read_text(encoding="utf-8")

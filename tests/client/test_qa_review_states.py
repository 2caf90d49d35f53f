"""Flagged translations (the service's `qa`) in each file's own review state; the reports; --qa, --flagged."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import polib
import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats.xcstrings import dump_xcode
from tests.support.scripted_service import Reply, ScriptedService

LOOP = {"check": "loop", "detail": '"Delete Delete" 4 times in a row'}
PO = r"""msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"

#: app.c:1
msgid "Open"
msgstr ""

#: app.c:2
#, c-format
msgid "Delete %d files"
msgstr ""

msgid "Delete one file"
msgid_plural "Delete %d files now"
msgstr[0] ""
msgstr[1] ""
"""
XLIFF12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en" datatype="plaintext" original="app">
    <body>
      <trans-unit id="open"><source>Open</source></trans-unit>
      <trans-unit id="delete"><source>Delete it</source></trans-unit>
    </body>
  </file>
</xliff>
"""
XLIFF20 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en">
  <file id="f1">
    <unit id="open"><segment><source>Open</source></segment></unit>
    <unit id="delete"><segment><source>Delete it</source></segment></unit>
  </file>
</xliff>
"""
XCSTRINGS = {
    "sourceLanguage": "en",
    "strings": {
        "open": {"localizations": {"en": {"stringUnit": {"state": "translated", "value": "Open"}}}},
        "delete": {"localizations": {"en": {"stringUnit": {"state": "translated", "value": "Delete it"}}}},
    },
    "version": "1.0",
}
# The states the XLIFF 1.2 schema's state-type lists, and XLIFF 2.0's (core, 4.3.1.35).
XLIFF12_STATES = {
    "final",
    "needs-adaptation",
    "needs-l10n",
    "needs-review-adaptation",
    "needs-review-l10n",
    "needs-review-translation",
    "needs-translation",
    "new",
    "signed-off",
    "translated",
}
XLIFF20_STATES = {"initial", "translated", "reviewed", "final"}


def flag_deletes(source: str, answer: str) -> list[dict[str, str]]:
    """The service's checks, scripted: every answer to a text about deleting is a loop."""
    return [LOOP] if "Delete" in source else []


def run(
    service: ScriptedService, tmp_path: Path, name: str, content: str, *extra: str
) -> tuple[int, Path, dict]:
    src, dst, report = tmp_path / name, tmp_path / f"out-{name}", tmp_path / "report.json"
    src.write_text(content, encoding="utf-8")
    flags = ["--no-progress", "--report", str(report), *extra]
    if "--cache" not in extra:
        flags.append("--no-cache")
    code = main(["--url", service.url, "--from", "en", "--to", "zh", str(src), "-o", str(dst), *flags])
    return code, dst, json.loads(report.read_text(encoding="utf-8"))


def test_po_flagged_entries_are_fuzzy_with_their_translation(
    service: ScriptedService, tmp_path: Path, catalogs_checked: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    service.state.qa = flag_deletes
    code, dst, report = run(service, tmp_path, "app.po", PO)
    err = capsys.readouterr().err
    assert code == 0 and catalogs_checked == [dst]  # msgfmt --check passed on what was written
    entries = {e.msgid: e for e in polib.pofile(str(dst))}
    assert entries["Open"].msgstr == "[zh] Open" and "fuzzy" not in entries["Open"].flags
    assert entries["Delete %d files"].flags == ["c-format", "fuzzy"]
    assert entries["Delete %d files"].msgstr == "[zh] Delete %d files"
    plural = entries["Delete one file"]
    assert plural.flags == ["fuzzy"] and plural.msgstr_plural == {0: "[zh] Delete %d files now"}
    assert "#, c-format, fuzzy\nmsgid" in dst.read_text(encoding="utf-8")
    assert [(f["source"], f["checks"]) for f in report["flagged"]] == [
        ("Delete %d files", [LOOP]),
        ("Delete one file", [LOOP]),
        ("Delete %d files now", [LOOP]),
    ]
    assert report["flagged"][0]["label"] == "line 11" and report["failed"] == 0
    assert f"flagged line 11: loop: {LOOP['detail']}: 'Delete %d files'" in err
    assert "4 segments: 4 translated, 0 cached, 0 skipped, 0 failed, 3 flagged" in err


def test_xliff12_flagged_target_needs_review_translation(service: ScriptedService, tmp_path: Path) -> None:
    service.state.qa = flag_deletes
    code, dst, _ = run(service, tmp_path, "app.xlf", XLIFF12)
    ns = "{urn:oasis:names:tc:xliff:document:1.2}"
    targets = {u.get("id"): u.find(f"{ns}target") for u in ET.parse(dst).iter(f"{ns}trans-unit")}
    assert code == 0 and {t.get("state") for t in targets.values()} <= XLIFF12_STATES
    assert (targets["open"].text, targets["open"].get("state")) == ("[zh] Open", "translated")
    assert (targets["delete"].text, targets["delete"].get("state")) == (
        "[zh] Delete it",
        "needs-review-translation",
    )


def test_xliff20_flagged_segment_stays_initial(service: ScriptedService, tmp_path: Path) -> None:
    service.state.qa = flag_deletes
    code, dst, _ = run(service, tmp_path, "app.xlf", XLIFF20)
    ns = "{urn:oasis:names:tc:xliff:document:2.0}"
    units = {u.get("id"): u.find(f"{ns}segment") for u in ET.parse(dst).iter(f"{ns}unit")}
    assert code == 0 and {s.get("state") for s in units.values()} <= XLIFF20_STATES
    assert (units["open"].get("state"), units["open"].findtext(f"{ns}target")) == ("translated", "[zh] Open")
    assert (units["delete"].get("state"), units["delete"].findtext(f"{ns}target")) == (
        "initial",
        "[zh] Delete it",
    )


def test_xcstrings_flagged_unit_needs_review(service: ScriptedService, tmp_path: Path) -> None:
    service.state.qa = flag_deletes
    code, dst, _ = run(service, tmp_path, "Localizable.xcstrings", json.dumps(XCSTRINGS, indent=2))
    text = dst.read_text(encoding="utf-8")
    out = json.loads(text)
    units = {key: entry["localizations"]["zh-Hans"]["stringUnit"] for key, entry in out["strings"].items()}
    assert code == 0 and dump_xcode(out) == text  # as Xcode writes it
    assert units == {
        "open": {"state": "translated", "value": "[zh] Open"},
        "delete": {"state": "needs_review", "value": "[zh] Delete it"},
    }


@pytest.mark.parametrize(("choice", "written"), [("keep", "[zh] Delete it"), ("skip", "Delete it")])
def test_a_format_without_review_state_keeps_or_skips_as_asked(
    service: ScriptedService, tmp_path: Path, choice: str, written: str
) -> None:
    service.state.qa = flag_deletes
    ui = json.dumps({"open": "Open", "delete": "Delete it"})
    code, dst, report = run(service, tmp_path, "ui.json", ui, "--flagged", choice)
    assert code == 0 and json.loads(dst.read_text()) == {"open": "[zh] Open", "delete": written}
    assert [f["label"] for f in report["flagged"]] == ["delete"]


def test_qa_report_csv_and_html_list_every_flagged_string(service: ScriptedService, tmp_path: Path) -> None:
    sly = {"check": "markup", "detail": "lost <script>alert(1)</script> & more"}
    service.state.qa = lambda source, answer: [LOOP, sly] if "Delete" in source else []
    ui = json.dumps({"open": "Open", "delete": "Delete <b>all</b> & more", "wipe": "Delete it"})
    run(service, tmp_path, "ui.json", ui, "--qa-report", str(tmp_path / "qa.csv"))
    with (tmp_path / "qa.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["label"], r["checks"], r["source"], r["translation"]) for r in rows] == [
        ("delete", "loop markup", "Delete <b>all</b> & more", "[zh] Delete <b>all</b> & more"),
        ("wipe", "loop markup", "Delete it", "[zh] Delete it"),
    ]
    assert rows[0]["reason"] == f"loop: {LOOP['detail']}; markup: {sly['detail']}"

    run(service, tmp_path, "ui.json", ui, "--qa-report", str(tmp_path / "qa.html"))
    page = (tmp_path / "qa.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "<b>all" not in page
    cells = _cells(page)
    assert ["delete", f"loop: {LOOP['detail']}markup: {sly['detail']}", "Delete <b>all</b> & more"] == (
        cells[0][:3]
    )
    assert len(cells) == 2 and cells[1][3] == "[zh] Delete it"


def _cells(page: str) -> list[list[str]]:
    """The text of each body row's cells, as a browser would show them."""
    rows: list[list[str]] = []

    class Cells(HTMLParser):
        cell: str | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "tr":
                rows.append([])
            elif tag == "td":
                self.cell = ""

        def handle_endtag(self, tag: str) -> None:
            if tag == "td" and self.cell is not None:
                rows[-1].append(self.cell)
                self.cell = None

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell += data

    Cells(convert_charrefs=True).feed(page)
    return [row for row in rows if row]


def test_a_bad_qa_report_name_is_a_usage_error(service: ScriptedService, tmp_path: Path) -> None:
    (tmp_path / "ui.json").write_text('{"a": "Open"}', encoding="utf-8")
    args = ["--url", service.url, "--to", "zh", str(tmp_path / "ui.json"), "--qa-report", "qa.txt"]
    assert main(args) == 2 and service.state.requests == []


def test_flagged_translations_are_not_cached(service: ScriptedService, tmp_path: Path) -> None:
    service.state.qa = flag_deletes
    cache = ["--cache", str(tmp_path / "cache.sqlite")]
    ui = json.dumps({"open": "Open", "delete": "Delete it"})
    run(service, tmp_path, "ui.json", ui, *cache)
    service.state.requests.clear()
    _, _, again = run(service, tmp_path, "ui.json", ui, *cache)
    assert service.state.sent_texts() == ["Delete it"] and again["cached"] == 1
    assert [f["label"] for f in again["flagged"]] == ["delete"]


def test_qa_policy_is_asked_for_retry_by_default(service: ScriptedService, tmp_path: Path) -> None:
    run(service, tmp_path, "ui.json", '{"a": "Open"}')
    run(service, tmp_path, "ui.json", '{"a": "Save"}', "--qa", "off")
    assert [body.get("qa") for body in service.state.requests] == ["retry", "off"]


def test_a_service_that_predates_qa_is_asked_again_without_it(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refusal = {"error": {"code": "unknown_field", "message": "unknown field(s): qa"}}
    service.state.script.append(Reply(422, refusal))
    code, dst, report = run(service, tmp_path, "ui.json", json.dumps({"a": "Open", "b": "Save"}))
    assert code == 0 and json.loads(dst.read_text()) == {"a": "[zh] Open", "b": "[zh] Save"}
    assert [body.get("qa") for body in service.state.requests] == ["retry", None]
    assert report["flagged"] == [] and "predates answer checks" in capsys.readouterr().err

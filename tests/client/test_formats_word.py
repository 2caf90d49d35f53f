"""`translate` reads every format it lists: a real Word file made with python-docx comes back a Word file
translated (the document API's reader, one for both), and an extension no format takes is refused
naming those taken, as the document API refuses it, instead of being sent as lines of text."""

from __future__ import annotations

import io
from pathlib import Path

import docx
import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import FORMATS, extensions
from hunyuan_serve.replica.documents.jobs import UploadInvalid, format_of
from tests.support.scripted_service import ScriptedService


def _notes(path: Path) -> Path:
    """A Word file as an editor writes one: a heading, a paragraph with a bold run, a table."""
    word = docx.Document()
    word.add_heading("Release notes", level=1)
    paragraph = word.add_paragraph("Open the file ")
    paragraph.add_run("before").bold = True
    paragraph.add_run(" you print.")
    table = word.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "Save"
    table.cell(0, 1).text = "Quit"
    word.save(str(path))
    return path


def _translate(service: ScriptedService, *argv: str) -> int:
    return main(["--url", service.url, "--to", "fr", "--no-cache", "--no-progress", *argv])


def test_a_word_file_comes_back_translated_keeping_its_styles(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = _notes(tmp_path / "notes.docx"), tmp_path / "notes.de.docx"
    code = _translate(service, str(source), "-o", str(out))
    assert code == 0, capsys.readouterr().err
    sent = sorted(
        t for request in service.state.requests for t in request.get("texts", [request.get("text")])
    )
    assert sent == ["Open the file before you print.", "Quit", "Release notes", "Save"]
    back = docx.Document(io.BytesIO(out.read_bytes()))
    assert [(p.style.name, p.text) for p in back.paragraphs] == [
        ("Heading 1", "[fr] Release notes"),
        ("Normal", "[fr] Open the file before you print."),
    ]
    assert [c.text for c in back.tables[0].rows[0].cells] == ["[fr] Save", "[fr] Quit"]
    assert source.read_bytes() != out.read_bytes() and docx.Document(str(source)).paragraphs[0].text == (
        "Release notes"
    )


def test_a_file_that_is_not_word_inside_is_a_usage_error(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.docx").write_text("plain text under a Word name\n", encoding="utf-8")
    assert _translate(service, str(tmp_path / "notes.docx"), "-o", str(tmp_path / "out.docx")) == 2
    assert "notes.docx: not a Word .docx file (BadZipFile)" in capsys.readouterr().err
    assert service.state.requests == [] and not (tmp_path / "out.docx").exists()


@pytest.mark.parametrize("name", ["x.unknownext", "scan.pdf", "values/misc.xml"])
def test_an_extension_no_format_takes_is_refused_naming_those_taken(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        b"<root>Open the file</root>\n" if name.endswith(".xml") else b"%PDF-1.7\n\xe2\x28\xa1\n"
    )
    assert _translate(service, str(path), "-o", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    extension = "." + name.rsplit(".", 1)[1]
    assert f"the extension '{extension}' is not one of the formats' (supported: .arb " in err, err
    assert " .docx " in err and " strings.xml," in err and "--format" in err
    assert service.state.requests == [] and not (tmp_path / "out").exists()


def test_format_reads_an_unlisted_extension_as_told(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x.unknownext").write_text("Open the file\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    assert _translate(service, "--format", "text", str(tmp_path / "x.unknownext"), "-o", str(out)) == 0
    assert out.read_text(encoding="utf-8") == "[fr] Open the file\n"


def test_the_cli_and_the_document_api_take_the_same_extensions() -> None:
    for ending in extensions():
        assert format_of(f"file{ending}") == next(i.name for i in FORMATS.values() if ending in i.extensions)
    with pytest.raises(UploadInvalid, match=r"'\.unknownext' is not supported"):
        format_of("x.unknownext")

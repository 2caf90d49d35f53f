"""A long segment whose answer lost lines or sentences is split in two and re-sent, never written short."""

from __future__ import annotations

import json
from pathlib import Path

import polib
import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats.markdown import sentence_segmenter, split_sentences
from hunyuan_serve.localization.resplit import halves
from tests.support.scripted_service import ScriptedService, mock_translate

LINES = [f"Line {n} of the release notes." for n in range(1, 9)]
SENTENCES = " ".join(f"Sentence number {n} says something." for n in range(1, 7))


def drops_a_line(text: str, target: str) -> str:
    """The trackers' '50 sentences in, 46 out': a text of more than two lines comes back one short."""
    lines = text.split("\n")
    kept = lines[:1] + lines[2:] if len(lines) > 2 else lines
    return "\n".join(mock_translate(line, target) for line in kept)


def drops_a_sentence(text: str, target: str) -> str:
    sentences = [s.strip() for s in split_sentences(sentence_segmenter("en"), text)]
    kept = sentences[:-1] if len(sentences) > 2 else sentences
    return " ".join(mock_translate(s, target) for s in kept)


def count_checks(source: str, answer: str) -> list[dict[str, str]]:
    """The service's completeness checks, scripted: lines and sentences counted in and out."""
    flags = []
    lines_in, lines_out = source.count("\n") + 1, answer.count("\n") + 1
    if lines_out < lines_in:
        flags.append({"check": "lines", "detail": f"{lines_in} lines in, {lines_out} out"})
    segmenter = sentence_segmenter("en")
    sentences_in, sentences_out = (len(split_sentences(segmenter, text)) for text in (source, answer))
    if sentences_out < sentences_in:
        flags.append({"check": "sentences", "detail": f"{sentences_in} in, {sentences_out} out"})
    return flags


def run(
    service: ScriptedService, tmp_path: Path, values: dict[str, str], *extra: str
) -> tuple[int, dict, dict]:
    src, dst, report = tmp_path / "notes.json", tmp_path / "out.json", tmp_path / "report.json"
    src.write_text(json.dumps(values), encoding="utf-8")
    args = ["--url", service.url, "--from", "en", "--to", "zh", str(src), "-o", str(dst), "--no-cache"]
    code = main([*args, "--no-progress", "--report", str(report), *extra])
    return code, json.loads(dst.read_text(encoding="utf-8")), json.loads(report.read_text(encoding="utf-8"))


def test_a_lost_line_is_split_again_until_every_line_is_there(
    service: ScriptedService, tmp_path: Path
) -> None:
    service.state.translate, service.state.qa = drops_a_line, count_checks
    code, out, report = run(service, tmp_path, {"notes": "\n".join(LINES), "title": "Notes"})
    assert code == 0 and out["notes"].split("\n") == [f"[zh] {line}" for line in LINES]
    sent = service.state.sent_texts()
    assert "\n".join(LINES[:4]) in sent and "\n".join(LINES[4:]) in sent  # halves, then their halves
    assert "\n".join(LINES[:2]) in sent and all(len(text.split("\n")) <= 8 for text in sent)
    assert report["flagged"] == [] and report["requests"] == 1 + 1 + 2  # the batch, halves, quarters


def test_a_lost_sentence_is_split_at_sentences(service: ScriptedService, tmp_path: Path) -> None:
    service.state.translate, service.state.qa = drops_a_sentence, count_checks
    code, out, report = run(service, tmp_path, {"about": SENTENCES})
    expected = [f"[zh] Sentence number {n} says something." for n in range(1, 7)]
    assert code == 0 and out["about"] == " ".join(expected) and report["flagged"] == []


def test_a_piece_that_cannot_be_split_keeps_its_flag(service: ScriptedService, tmp_path: Path) -> None:
    service.state.translate = lambda text, target: "[zh] short"
    service.state.qa = lambda source, answer: [{"check": "sentences", "detail": "3 in, 1 out"}]
    code, out, report = run(service, tmp_path, {"one": "A single sentence, no cut in it"})
    assert code == 0 and out["one"] == "[zh] short"
    assert [f["checks"][0]["check"] for f in report["flagged"]] == ["sentences"]
    assert service.state.sent_texts() == ["A single sentence, no cut in it"]


def test_a_service_without_checks_gets_the_clients_line_count(
    service: ScriptedService, tmp_path: Path
) -> None:
    """A service that predates QA sends no `qa`: the client counts the lines itself and splits the same."""
    service.state.translate = drops_a_line
    code, out, _ = run(service, tmp_path, {"notes": "\n".join(LINES)})
    assert code == 0 and out["notes"].split("\n") == [f"[zh] {line}" for line in LINES]
    service.state.requests.clear()
    _, out, _ = run(service, tmp_path, {"notes": "\n".join(LINES)}, "--qa", "off")
    assert len(out["notes"].split("\n")) == 7 and len(service.state.requests) == 1  # asked for no checks


def test_a_po_entry_of_many_lines_is_written_whole(
    service: ScriptedService, tmp_path: Path, catalogs_checked: list[Path]
) -> None:
    service.state.translate, service.state.qa = drops_a_line, count_checks
    entry = polib.POEntry(msgid="\n".join(LINES) + "\n", msgstr="")
    catalog = polib.POFile()
    catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    catalog.append(entry)
    src, dst = tmp_path / "notes.po", tmp_path / "notes.zh.po"
    catalog.save(str(src))
    assert (
        main(["--url", service.url, "--to", "zh", str(src), "-o", str(dst), "--no-cache", "--no-progress"])
        == 0
    )
    written = polib.pofile(str(dst))[0]
    assert catalogs_checked == [dst] and written.msgstr.split("\n") == [f"[zh] {line}" for line in LINES] + [
        ""
    ]


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ("One.\n\nTwo.\nThree.\n\nFour.", ("One.\n\nTwo.\nThree.", "\n\n", "Four.")),
        ("a\nb\nc\nd", ("a\nb", "\n", "c\nd")),
        ("First one. Second one. Third one.", ("First one.", " ", "Second one. Third one.")),
        ("Just one sentence", None),
    ],
)
def test_halves_cut_at_the_coarsest_boundary_nearest_the_middle(
    text: str, cut: tuple[str, str, str] | None
) -> None:
    assert halves(text) == cut
    if cut is not None:
        assert "".join(cut) == text

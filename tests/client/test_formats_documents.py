"""Subtitles and Markdown through `translate`: real files byte-identical via identity, structure kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import srt
from markdown_it import MarkdownIt

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import FormatError, Options, parse
from hunyuan_serve.localization.formats.markdown import sentence_segmenter, split_sentences
from hunyuan_serve.localization.formats.subtitles import wrap_lines
from tests.support.scripted_service import ScriptedService

DATA = Path(__file__).resolve().parents[1] / "data" / "pysubs2"
REAL_FILES = [DATA / "README.md", DATA / "test_video.srt", DATA / "vtt_example.vtt"]


def identity(text: str, target: str) -> str:
    return text


def translate(service: ScriptedService, tmp_path: Path, src: Path, *args: str) -> tuple[int, Path, dict]:
    dst, report = tmp_path / f"out{src.suffix}", tmp_path / "report.json"
    flags = ["--no-cache", "--no-progress", "--report", str(report)]
    code = main(["--url", service.url, "--from", "en", "--to", "zh", *args, str(src), "-o", str(dst), *flags])
    return code, dst, json.loads(report.read_text()) if report.exists() else {}


def blocks(markdown: str) -> list[tuple[str, str]]:
    """The block structure (token types, fences and code verbatim) that translation must not change."""
    kept = ("fence", "code_block", "html_block")
    return [
        (t.type, t.content if t.type in kept else "")
        for t in MarkdownIt("commonmark").enable("table").parse(markdown)
        if t.type != "inline"
    ]


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("crlf_bom", [False, True], ids=["as-is", "crlf-bom"])
def test_real_file_through_identity_is_byte_identical(
    service: ScriptedService, tmp_path: Path, path: Path, crlf_bom: bool
) -> None:
    src = tmp_path / path.name
    data = path.read_bytes()
    src.write_bytes(b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n") if crlf_bom else data)
    service.state.translate = identity
    code, dst, report = translate(service, tmp_path, src)
    assert code == 0 and report["translated"] > 0  # the texts did go to the service
    assert dst.read_bytes() == src.read_bytes()


def test_subtitles_keep_numbers_timings_and_line_count(service: ScriptedService, tmp_path: Path) -> None:
    code, dst, report = translate(service, tmp_path, DATA / "test_video.srt")
    assert code == 0 and report["translated"] == 20
    before, after = list(srt.parse(REAL_FILES[1].read_text())), list(srt.parse(dst.read_text()))
    assert [(c.index, c.start, c.end) for c in after] == [(c.index, c.start, c.end) for c in before]
    for old, new in zip(before, after, strict=True):
        assert 1 <= len(new.content.splitlines()) <= len(old.content.splitlines())
        assert " ".join(new.content.split()) == "[zh] " + " ".join(old.content.split())


def test_markdown_translates_prose_only(service: ScriptedService, tmp_path: Path) -> None:
    code, dst, _ = translate(service, tmp_path, DATA / "README.md")
    source, out = (DATA / "README.md").read_text(), dst.read_text()
    assert code == 0
    assert blocks(out) == blocks(source)  # headings, lists, fences (code verbatim) all where they were
    assert "pip install pysubs2\npysubs2 --shift 0.3s *.srt" in out
    sent = service.state.sent_texts()
    assert "pysubs2 is a Python library for editing subtitle files." in sent  # a sentence, not the paragraph
    assert any(
        text.startswith("It’s based on *SubStation Alpha*, the native format of\n<a1>Aegisub</a1>")
        for text in sent
    )  # a link goes as a tag pair around its text: its URL never reaches the model
    assert not any("pip install" in text for text in sent)


def test_markdown_front_matter_and_code_kept(service: ScriptedService, tmp_path: Path) -> None:
    src = tmp_path / "page.md"
    src.write_text(
        "---\ntitle: Hello world\n---\n# Install it\n\n"
        "Run `pip install x` first. Then see https://x.org/a.b now.\n"
        "\n    indented code stays\n\n| Name | Use |\n|------|-----|\n| srt | Subtitles here |\n",
        encoding="utf-8",
    )
    code, dst, _ = translate(service, tmp_path, src)
    assert code == 0
    assert dst.read_text(encoding="utf-8") == (
        "---\ntitle: Hello world\n---\n# [zh] Install it\n\n"
        "[zh] Run `pip install x` first. [zh] Then see https://x.org/a.b now.\n"
        "\n    indented code stays\n\n| [zh] Name | [zh] Use |\n|------|-----|\n"
        "| [zh] srt | [zh] Subtitles here |\n"
    )


def test_long_document_fans_out_and_comes_back_in_order(service: ScriptedService, tmp_path: Path) -> None:
    sentences = [f"Sentence number {n} is here." for n in range(40)]
    src = tmp_path / "long.md"
    src.write_text(
        "\n\n".join(" ".join(sentences[i : i + 4]) for i in range(0, 40, 4)) + "\n", encoding="utf-8"
    )
    service.state.hold = 4  # the first requests wait until four are in flight at once
    code, dst, report = translate(service, tmp_path, src, "--batch-size", "3", "--concurrency", "4")
    assert code == 0 and report["translated"] == 40 and report["requests"] == 14
    assert service.state.max_in_flight == 4
    paragraphs = dst.read_text().strip().split("\n\n")
    assert paragraphs == [" ".join(f"[zh] {s}" for s in sentences[i : i + 4]) for i in range(0, 40, 4)]


def test_sentences_split_by_pysbd_never_inside_code() -> None:
    text = "Hello there. Use `a. b` now. Next one."
    pieces = split_sentences(sentence_segmenter("en"), text)
    assert pieces == ["Hello there. ", "Use `a. b` now. ", "Next one."]
    assert "".join(pieces) == text


def test_wrap_fits_the_cue_lines() -> None:
    assert wrap_lines("one two three four", 2) == ["one two", "three four"]
    assert wrap_lines("一二三四五六七八", 2) == ["一二三四", "五六七八"]
    assert wrap_lines("short", 3) == ["short"]


def test_malformed_subtitles_name_the_line() -> None:
    with pytest.raises(FormatError) as caught:
        parse("1\n00:00:01,000 --> 00:00:02,000\nHi\n\n2\n00:00:0x --> 00:00:03,000\nHo\n", "srt", Options())
    assert caught.value.line == 5


def test_unknown_format_names_the_supported_ones(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--url", service.url, "--to", "zh", "--format", "pdf", str(DATA / "README.md")])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'pdf'" in err and "po" in err and "srt" in err and "docx" in err
    with pytest.raises(
        FormatError,
        match="supported: text, json, arb, yaml, po, android, xliff, properties, strings, stringsdict, "
        "xcstrings, srt,",
    ):
        parse("x", "pdf")


def test_output_onto_the_input_is_refused(service: ScriptedService, tmp_path: Path) -> None:
    src = tmp_path / "a.md"
    src.write_text("Hello.\n", encoding="utf-8")
    assert main(["--url", service.url, "--to", "zh", str(src), "-o", str(src), "--no-cache"]) == 2
    assert src.read_text(encoding="utf-8") == "Hello.\n" and service.state.requests == []


def test_help_lists_the_formats(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name, extensions in (
        ("po", ".po .pot"),
        ("stringsdict", ".stringsdict"),
        ("xcstrings", ".xcstrings"),
        ("markdown", ".md .markdown"),
    ):
        assert f"  {name:<12} {extensions}" in out


def test_webvtt_keeps_header_notes_styles_regions_and_settings(
    service: ScriptedService, tmp_path: Path
) -> None:
    src = DATA / "vtt_example.vtt"
    code, dst, report = translate(service, tmp_path, src)
    assert code == 0 and report["total"] == 9  # the empty cue and the JSON metadata cue are not prose
    out, source = dst.read_text(encoding="utf-8"), src.read_text(encoding="utf-8")
    kept = [
        line
        for line in source.splitlines()
        if "-->" in line or line.startswith(("NOTE", "STYLE", "WEBVTT", "id:"))
    ]
    assert [line for line in out.splitlines() if line in kept] == kept
    assert "[zh] I like <v Salame>lime.</v>" in out and '"type": "WikipediaPage",' in out


def test_webvtt_without_header_or_timing_is_refused() -> None:
    with pytest.raises(FormatError, match="starts with the line WEBVTT"):
        parse("1\n00:00.000 --> 00:01.000\nHi\n", "vtt", Options())
    with pytest.raises(FormatError) as caught:
        parse("WEBVTT\n\nHello there\nno timing\n", "vtt", Options())
    assert caught.value.line == 3


def test_bench_documents_row_and_its_report_section() -> None:
    from bench.documents import DocumentRow, build_document, section

    doc = build_document(600)
    assert len(parse(doc, "markdown", Options()).segments) >= 600 + 600 // 40  # sentences and headings
    assert len(doc) / 1800 >= 10  # tens of pages
    row = DocumentRow(36000, 615, 0, 0, 20.5, 120, 30.0)
    assert row.pages == 20 and round(row.speedup, 2) == round((615 / 20.5) / (120 / 30.0), 2)
    lines = section(row, 8, 16)
    assert lines[0].startswith("## Long documents") and "| 20 pages | 615 | 0 | 20.5 | 30.00 |" in lines[-2]
    assert "| 7.5x |" in lines[-2] and section(None) == []

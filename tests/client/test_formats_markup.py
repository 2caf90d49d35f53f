"""Inline markup in Markdown and HTML: the family's formatted prompt (preserve_format) where it has one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import Options, parse
from tests.support import scripted_service
from tests.support.scripted_service import ScriptedService

MARKDOWN = (
    "# Guide\n\nPress **Save** to keep the [draft](https://x.org/d). Nothing else changes.\n\n"
    "Run `make up` first.\n"
)
HTML = '<p>Click <a href="https://x.org/a">here</a> to start. It is <b>fast</b>. Plain words.</p>\n'


def serve_family(monkeypatch: pytest.MonkeyPatch, family: str) -> None:
    """The stand-in's /health names a model family, as the replica's does (it decides preserve_format)."""
    original = scripted_service._Handler.do_GET

    def do_get(self: scripted_service._Handler) -> None:
        if self.path.startswith("/health"):
            self._send(scripted_service.Reply(200, {"status": "ready", "family": family}))
        else:
            original(self)

    monkeypatch.setattr(scripted_service._Handler, "do_GET", do_get)


def run(
    service: ScriptedService, tmp_path: Path, name: str, content: str, *extra: str
) -> tuple[int, str, dict]:
    src, dst, report = tmp_path / name, tmp_path / f"out-{name}", tmp_path / "report.json"
    src.write_text(content, encoding="utf-8")
    flags = ["--no-cache", "--no-progress", "--report", str(report), *extra]
    code = main(["--url", service.url, "--from", "en", "--to", "zh", str(src), "-o", str(dst), *flags])
    return code, dst.read_text(encoding="utf-8"), json.loads(report.read_text())


def formatted_texts(service: ScriptedService) -> tuple[set[str], set[str]]:
    """(texts sent with preserve_format, texts sent without)."""
    on: set[str] = set()
    off: set[str] = set()
    for body in service.state.requests:
        (on if body.get("preserve_format") is True else off).update(body.get("texts", []))
    return on, off


def test_segments_with_markup_are_flagged() -> None:
    doc = parse(MARKDOWN, "markdown", Options())
    assert dict(zip(doc.segments, doc.formatted, strict=True)) == {
        "Guide": False,
        "Press **Save** to keep the <a1>draft</a1>. ": True,  # the link's URL is not sent
        "Nothing else changes.": False,
        "Run `make up` first.": True,
    }
    assert parse(HTML, "html", Options()).formatted == (True, True, False)


def test_markdown_markup_goes_through_the_formatted_prompt(
    service: ScriptedService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve_family(monkeypatch, "hy-mt1.5")
    code, out, report = run(service, tmp_path, "guide.md", MARKDOWN)
    on, off = formatted_texts(service)
    assert code == 0 and report["translated"] == 4
    assert on == {"Press **Save** to keep the <a1>draft</a1>.", "Run `make up` first."}
    assert off == {"Guide", "Nothing else changes."}
    assert "[zh] Press **Save** to keep the [draft](https://x.org/d). [zh] Nothing else changes." in out


def test_html_tags_go_through_the_formatted_prompt(
    service: ScriptedService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve_family(monkeypatch, "hy-mt1.5")
    code, out, _ = run(service, tmp_path, "page.html", HTML)
    on, off = formatted_texts(service)
    assert code == 0 and on == {'Click <a href="https://x.org/a">here</a> to start.', "It is <b>fast</b>."}
    assert off == {"Plain words."} and "[zh] It is <b>fast</b>." in out


@pytest.mark.parametrize("family", ["hunyuan-mt", "hy-mt2", None])
def test_without_a_formatted_prompt_markup_is_masked_as_placeholders(
    service: ScriptedService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str | None
) -> None:
    if family:
        serve_family(monkeypatch, family)
    service.state.translate = lambda text, target: text.replace("`make up`", "make up")
    code, out, report = run(service, tmp_path, "guide.md", MARKDOWN)
    on, _ = formatted_texts(service)
    assert on == set() and code == 1 and report["failures"][0]["problem"] == "missing '`make up`'"
    assert "Run `make up` first." in out  # the source kept where its code span was lost


def test_lost_markup_is_a_failure_and_the_source_stays(
    service: ScriptedService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve_family(monkeypatch, "hy-mt1.5")
    # What the service answers when the model lost a pair: the text kept, the markup dropped.
    service.state.translate = lambda text, target: text.replace("**", "")
    code, out, report = run(service, tmp_path, "guide.md", MARKDOWN)
    assert code == 1 and [f["problem"] for f in report["failures"]] == ["markup lost: ****"]
    assert "Press **Save** to keep" in out


def test_another_instruction_turns_the_formatted_prompt_off(
    service: ScriptedService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve_family(monkeypatch, "hy-mt1.5")  # has a contextual prompt too; one instruction per request
    code, _, _ = run(service, tmp_path, "guide.md", MARKDOWN, "--context", "A user guide")
    on, off = formatted_texts(service)
    assert code == 0 and on == set() and "Run `make up` first." in off

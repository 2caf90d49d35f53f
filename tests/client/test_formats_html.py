"""HTML through `translate`: HTML5 Boilerplate's pages byte-identical via identity, prose only translated."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import Options, parse
from tests.support.scripted_service import ScriptedService

DATA = Path(__file__).resolve().parents[1] / "data" / "html5-boilerplate"
PAGE = """<!doctype html>
<html lang="en">
<head><title>My page</title><style>p { color: red; }</style></head>
<body>
  <h1 class="big">Welcome &amp; hello</h1>
  <p>Click <a href="https://x.org/a" title="Go there">here</a> to start. It is <b>fast</b>.</p>
  <img src="a.png" alt="A cat">
  <pre><code>print("hi")</code></pre>
  <script>var s = "do not translate";</script>
  <!-- a comment -->
</body>
</html>
"""


def tag_marker(text: str, target: str) -> str:
    """A 'model' that translates the words around tags and keeps every tag as it is."""
    return "".join(p if p.startswith(("<", "&")) else p.upper() for p in re.split(r"(<[^>]+>|&\w+;)", text))


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, " ".join(f"{k}={v}" for k, v in attrs if k not in ("alt", "title"))))

    def handle_endtag(self, tag: str) -> None:
        self.tags.append(("/" + tag, ""))


def tags(text: str) -> list[tuple[str, str]]:
    parser = _Tags()
    parser.feed(text)
    return parser.tags


def run(service: ScriptedService, tmp_path: Path, src: Path) -> tuple[int, Path, dict]:
    dst, report = tmp_path / "out.html", tmp_path / "report.json"
    flags = ["--no-cache", "--no-progress", "--report", str(report)]
    code = main(["--url", service.url, "--from", "en", "--to", "fr", str(src), "-o", str(dst), *flags])
    return code, dst, json.loads(report.read_text()) if report.exists() else {}


@pytest.mark.parametrize("name", ["404.html", "index.html"])
def test_boilerplate_through_identity_is_byte_identical(
    service: ScriptedService, tmp_path: Path, name: str
) -> None:
    service.state.translate = lambda text, target: text
    code, dst, report = run(service, tmp_path, DATA / name)
    assert code == 0 and report["translated"] >= 1
    assert dst.read_bytes() == (DATA / name).read_bytes()


def test_boilerplate_404_text_translated_css_kept(service: ScriptedService, tmp_path: Path) -> None:
    code, dst, _ = run(service, tmp_path, DATA / "404.html")
    out, src = dst.read_text(), (DATA / "404.html").read_text()
    assert code == 0 and tags(out) == tags(src)
    assert "<h1>[fr] Page Not Found</h1>" in out and "<title>[fr] Page Not Found</title>" in out
    assert "font-family: sans-serif;" in out and "IE needs 512+ bytes" in out
    sent = set(service.state.sent_texts())
    assert sent == {"Page Not Found", "Sorry, but the page you were trying to view does not exist."}


def test_only_prose_alt_and_title_change(service: ScriptedService, tmp_path: Path) -> None:
    src = tmp_path / "page.html"
    src.write_text(PAGE, encoding="utf-8")
    service.state.translate = tag_marker
    code, dst, _ = run(service, tmp_path, src)
    out = dst.read_text()
    assert code == 0 and tags(out) == tags(PAGE)
    assert (
        '<p>CLICK <a href="https://x.org/a" title="GO THERE">HERE</a> TO START. IT IS <b>FAST</b>.</p>' in out
    )
    assert '<img src="a.png" alt="A CAT">' in out and '<h1 class="big">WELCOME &amp; HELLO</h1>' in out
    assert '<pre><code>print("hi")</code></pre>' in out and 'var s = "do not translate";' in out
    sent = service.state.sent_texts()
    assert 'Click <a href="https://x.org/a" title="Go there">here</a> to start.' in sent  # one sentence
    assert not any("print" in text or "color" in text for text in sent)


def test_attribute_translation_is_escaped() -> None:
    doc = parse('<img alt="A cat">', "html", Options())
    assert doc.segments == ('<img alt="A cat">', "A cat")  # the tag alone (nothing to send), its alt
    assert doc.render([doc.segments[0], 'Un "chat" & co']) == '<img alt="Un &quot;chat&quot; &amp; co">'

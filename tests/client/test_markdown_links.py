"""Markdown links and images from markdown-it's tokens: URLs never sent, text translated, all kept whole.

Real READMEs (Apache-2.0, from Debian's podman and runc packages): badges, an image inside a link, a
paragraph of four links; before, a URL pattern ran across `)](` and the model was sent every URL.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from markdown_it import MarkdownIt

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import Options, parse
from hunyuan_serve.text.placeholders import split_protected
from tests.support.scripted_service import ScriptedService

DATA = Path(__file__).resolve().parents[1] / "data"
PODMAN, RUNC = DATA / "podman" / "README.md", DATA / "runc" / "README.md"
_TAG = re.compile(r"</?(?:a|img)\d+>")


def shout(text: str, target: str) -> str:
    """A 'translation' that changes every word (upper case) and keeps the tags, code spans and other
    placeholders as the model must."""
    return "".join(chunk if kept else chunk.upper() for chunk, kept in split_protected(text))


def links(text: str) -> list[tuple[str, str, str]]:
    """(kind, URL, text or alt) of every link and image, as markdown-it reads the document."""
    found = []
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        for child in token.children or []:
            if child.type == "link_open":
                found.append(("link", str(child.attrs["href"]), ""))
            elif child.type == "image":
                found.append(("image", str(child.attrs["src"]), child.content))
    return found


def translate(service: ScriptedService, tmp_path: Path, src: Path) -> tuple[int, str, dict]:
    dst, report = tmp_path / "out.md", tmp_path / "report.json"
    args = ["--url", service.url, "--from", "en", "--to", "fr", str(src), "-o", str(dst)]
    code = main([*args, "--no-cache", "--no-progress", "--report", str(report)])
    return code, dst.read_text(encoding="utf-8"), json.loads(report.read_text(encoding="utf-8"))


def test_no_url_of_a_link_or_image_is_sent_and_every_one_comes_back(
    service: ScriptedService, tmp_path: Path
) -> None:
    service.state.translate = shout
    source = PODMAN.read_text(encoding="utf-8")
    code, out, report = translate(service, tmp_path, PODMAN)
    before, after = links(source), links(out)
    assert code == 0 and report["failed"] == 0 and len(before) > 40
    assert [(kind, url) for kind, url, _ in after] == [(kind, url) for kind, url, _ in before]
    assert [alt for _, _, alt in after] == [alt.upper() for _, _, alt in before]  # alt text translated
    sent = "\n".join(service.state.sent_texts())
    assert not [url for _, url, _ in before if url in sent]  # not one URL reached the model
    assert "http" not in sent


def test_an_image_inside_a_link_and_four_links_in_a_paragraph(
    service: ScriptedService, tmp_path: Path
) -> None:
    service.state.translate = shout
    _, out, _ = translate(service, tmp_path, PODMAN)
    godoc = "https://godoc.org/github.com/containers/podman/libpod"
    assert f"* [GODOC: ![GODOC]({godoc}?status.svg)]({godoc})" in out
    networking = next(line for line in out.splitlines() if "[NETAVARK]" in line)
    assert re.findall(r"\]\((\S+?)\)", networking) == [
        "https://github.com/containers/netavark",
        "https://github.com/containers/aardvark-dns",
        "https://github.com/containernetworking/cni",
        "https://github.com/rootless-containers/slirp4netns",
    ]
    assert "[SLIRP4NETNS](https://github.com/rootless-containers/slirp4netns)" in networking


def test_a_paragraph_of_badges_comes_back_with_every_url(service: ScriptedService, tmp_path: Path) -> None:
    service.state.translate = shout
    source = RUNC.read_text(encoding="utf-8")
    code, out, _ = translate(service, tmp_path, RUNC)
    badges = [link for link in links(source) if "badge" in link[1] or link[1].endswith(".svg")]
    assert code == 0 and len(badges) >= 5
    assert [(k, u) for k, u, _ in links(out)] == [(k, u) for k, u, _ in links(source)]
    assert "[![GO REPORT CARD](https://goreportcard.com/badge/github.com/opencontainers/runc)]" in out


def test_segments_hold_tag_pairs_where_links_were() -> None:
    doc = parse(
        'See [![Build](https://b.org/x.svg)](https://b.org/x), [docs](docs.md "Title") and '
        "<https://auto.org/a>.\n\n> Quoted [link](u1)\n> on [two\n> lines](u2).\n",
        "markdown",
        Options(),
    )
    assert doc.segments == (
        "See <a1><img2>Build</img2></a1>, <a3>docs</a3> and <a4></a4>.",
        "Quoted <a1>link</a1>\non <a2>two\nlines</a2>.",
    )
    out = doc.render(["Voir <a1><img2>Construit</img2></a1>, <a3>la doc</a3> et <a4></a4>.", doc.segments[1]])
    assert out.startswith(
        'Voir [![Construit](https://b.org/x.svg)](https://b.org/x), [la doc](docs.md "Title") et '
        "<https://auto.org/a>.\n"
    )


def test_a_lost_tag_fails_the_segment_and_its_source_stays(service: ScriptedService, tmp_path: Path) -> None:
    service.state.translate = lambda text, target: _TAG.sub("", text).upper()
    src = tmp_path / "in.md"
    src.write_text("Read [the guide](https://x.org/g) first.\n", encoding="utf-8")
    code, out, report = translate(service, tmp_path, src)
    assert code == 1 and out == "Read [the guide](https://x.org/g) first.\n"
    assert report["failures"][0]["problem"] == "missing '<a1>', '</a1>'"

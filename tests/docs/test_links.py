"""The docs' links lead somewhere: each relative link names a file, each anchor a heading of its page, each
source file named is there, and each config key named is a key of the settings reference."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from hunyuan_serve.config.reference import anchor

REPO = Path(__file__).resolve().parents[2]
PAGES = (REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md")))


# Other projects' READMEs kept as test inputs: their links point into their own repositories.
THIRD_PARTY = "tests/data/"


def _tracked_pages() -> tuple[Path, ...]:
    """Every Markdown file git tracks (bench/results/** and deploy/ too), and the pages above."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "*.md"], capture_output=True, text=True, check=True
    )
    names = [name for name in listed.stdout.splitlines() if not name.startswith(THIRD_PARTY)]
    return tuple(sorted({*(REPO / name for name in names), *PAGES}))


# Whose links are checked: every page a reader can open from the tree, a bench answer's included.
LINKED = _tracked_pages()
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
# A dotted config key in backticks: `replica.max_in_flight`, `nginx.port: 8080` (a value may follow).
KEY = re.compile(r"`((?:engine|replica|supervisor|nginx|auth|logs|gateway)\.[a-z_]+(?:\.[a-z_]+)*)[`: ]")
SETTINGS_KEY = re.compile(r"^\| `([^`]+)` \|", re.M)
# A source file in backticks: `edge/driver.py`, `hunyuan_serve/config/`, `tests/support/lanes.py`.
SOURCE = re.compile(r"`((?:[a-z_]+/)+[a-z_]+\.(?:py|j2|js))`")
# Where such a path is read from: the repository's root, or the package (`edge/driver.py`).
SOURCE_ROOTS = (REPO, REPO / "hunyuan_serve")
# File names that read like keys (`nginx.conf`, `gateway.crt`): a key never ends in a file's extension.
FILE_SUFFIXES = {"conf", "crt", "csr", "key", "pem", "py", "yaml", "yml", "json", "log", "txt", "secret"}


def _prose(text: str) -> str:
    return FENCE.sub("", text)


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a page (outside code blocks)."""
    return {anchor(title.replace("`", "")) for title in HEADING.findall(_prose(text))}


def broken_links(page: Path, root: Path = REPO) -> list[str]:
    """Each link of the page to a file that is not there, or to an anchor its page lacks."""
    out = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            out.append(f"{page.relative_to(root)}: {target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest.read_text(encoding="utf-8")):
            out.append(f"{page.relative_to(root)}: {target}: no such heading")
    return out


@pytest.mark.parametrize("page", LINKED, ids=[p.relative_to(REPO).as_posix() for p in LINKED])
def test_every_link_of_the_page_leads_somewhere(page: Path) -> None:
    assert page.exists(), f"{page.relative_to(REPO)} is missing"
    assert broken_links(page) == []


def test_a_missing_file_and_a_missing_heading_are_reported(tmp_path: Path) -> None:
    page = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# B page\n\n## The `x` part\n", encoding="utf-8")
    page.write_text(
        "# A\n[ok](b.md#the-x-part) [top](#a) [web](https://x.example/y) [gone](c.md) [bad](b.md#nope)\n"
        "```\n[in code](nowhere.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page, tmp_path) == ["a.md: c.md: no such file", "a.md: b.md#nope: no such heading"]


def test_every_config_key_the_docs_name_is_a_setting() -> None:
    settings = set(SETTINGS_KEY.findall((REPO / "docs" / "settings.md").read_text(encoding="utf-8")))
    unknown = [
        f"{page.relative_to(REPO)}: {key}"
        for page in PAGES
        if page.exists() and page.name != "settings.md"
        for key in KEY.findall(page.read_text(encoding="utf-8"))
        if key not in settings and key.rsplit(".", 1)[1] not in FILE_SUFFIXES
    ]
    assert unknown == []


def test_every_source_file_the_docs_name_is_there() -> None:
    gone = [
        f"{page.relative_to(REPO)}: {path}"
        for page in PAGES
        if page.exists()
        for path in SOURCE.findall(page.read_text(encoding="utf-8"))
        if not any((root / path).exists() for root in SOURCE_ROOTS)
    ]
    assert gone == []

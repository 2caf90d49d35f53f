"""The curl examples of the README and docs/ as a reader copies them, and what each documents."""

from __future__ import annotations

import json
import re
import shlex
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
# Every page whose examples run: the README and each page of docs/ (a new page's too).
PAGES = (README, *sorted((REPO / "docs").glob("*.md")))
FENCE = re.compile(r"^```[\w-]*\n(.*?)^```", re.M | re.S)
# A documented answer: the comment line right after an example, a JSON object or list.
DOCUMENTED = re.compile(r"^# ([{\[].*)$")
# "…" or "..." standing for more fields or items ("{..., ...}") or for any value (": ...").
MORE = re.compile(r",\s*(?:\.\.\.|…)\s*(?=[}\]])")
ANY = re.compile(r"(?<=[:\[])\s*(?:\.\.\.|…)")
PUBLIC = "localhost:8080"  # the address the examples call
# The first line of a block whose examples cannot run against one CPU stack (a GPU, several hosts, a
# cluster), saying why, so the reader sees it too: `# not run by tests/docs: needs a GPU`.
NOT_RUN = re.compile(r"^# not run by tests/docs: (\S.*)$")
# Commands that need what one CPU machine lacks (a GPU, other hosts, a cluster): a block with one says so.
NEEDS_MORE = re.compile(r"--gpus|gpu-smoke|FLAVOUR=gpu|kubectl|render k8s|gateway --inventory|--replica-host")

# The examples whose answer on the shared stack (a tiny Hunyuan-MT-7B-family checkpoint, no keys file)
# is another than 200, by a piece of their command: the status the API or the page says there, a
# phrase of that answer's body, and why.
SPECIAL: Mapping[str, tuple[int, str, str]] = {
    "/v2/glossaries": (
        201,
        '"glossary_id"',
        "DeepL answers a glossary it created 201 Created, as the deepl client expects",
    ),
    "localhost:8080/memories?file=": (
        201,
        '"units":1',
        "an import is made: 201 Created, with its provenance",
    ),
    "-X DELETE localhost:8080/memories": (
        204,
        "",
        "a deletion answers 204 No Content (leaving the memory empty)",
    ),
    "glossary_id=…": (
        400,
        "families that have one: ",
        "a glossary feeds the family's terminology prompt, which only HY-MT1.5 and Hy-MT2 have: the "
        "documented 400 naming them for any other family (the shared stack's is Hunyuan-MT-7B's)",
    ),
}
# Placeholders a reader fills in from the answer before: the piece of the command, and what replaces it.
FILLED: Mapping[str, Callable[[dict[str, Any]], str]] = {
    "glossary_id=…": lambda earlier: "glossary_id=" + earlier["glossary_id"],
    "download_file/ID.README.md": lambda earlier: (
        "download_file/" + urllib.parse.urlsplit(earlier["translatedFileUrl"]).path.rsplit("/", 1)[1]
    ),
}


@dataclass(frozen=True)
class Example:
    """One curl command as its page writes it: its line, its text, the answer it documents."""

    line: int
    command: str
    documented: str | None = None

    def argv(self, address: str) -> list[str]:
        """The command as the shell would split it, calling `address` instead of localhost:8080; a pipe
        the reader sends the answer through (`| python -m json.tool`) is left off: the answer is checked."""
        words = shlex.split(self.command.replace("\\\n", " "), comments=True)
        if "|" in words:
            words = words[: words.index("|")]
        return [word.replace(PUBLIC, address) for word in words]


@dataclass(frozen=True)
class Block:
    """The examples of one fenced block, run in order (a later one may use an earlier one's answer)."""

    line: int
    examples: tuple[Example, ...]
    page: str = "README.md"  # the page's path from the repository's root
    not_run: str | None = None  # why the block cannot run here, as its first line says

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def _complete(command: str) -> bool:
    """Whether the shell would run this as it stands (no open quote, no trailing backslash)."""
    if command.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(command.replace("\\\n", " "), comments=True)
    except ValueError:  # "No closing quotation": the command goes on on the next line
        return False
    return True


def _examples(lines: list[str], first_line: int) -> list[Example]:
    found, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("curl "):
            i += 1
            continue
        start, command = i, lines[i]
        while not _complete(command) and i + 1 < len(lines):
            i += 1
            command += "\n" + lines[i]
        documented = DOCUMENTED.match(lines[i + 1]) if i + 1 < len(lines) else None
        found.append(Example(first_line + start, command, documented.group(1) if documented else None))
        i += 1
    return found


@dataclass(frozen=True)
class Fenced:
    """One fenced block of a page: where it starts, its lines, and why it cannot run here (if it says)."""

    page: str
    line: int
    lines: tuple[str, ...]
    not_run: str | None


def fenced(text: str, page: str = "README.md") -> list[Fenced]:
    """Every fenced block of the text, its first line counted from 1."""
    out = []
    for fence in FENCE.finditer(text):
        lines = tuple(fence.group(1).splitlines())
        marked = NOT_RUN.match(lines[0]) if lines else None
        first = text.count("\n", 0, fence.start(1)) + 1
        out.append(Fenced(page, first, lines, marked.group(1) if marked else None))
    return out


def blocks(text: str, page: str = "README.md") -> list[Block]:
    """Every fenced block with a curl command, its examples in order; lines counted from 1."""
    out = []
    for fence in fenced(text, page):
        examples = _examples(list(fence.lines), fence.line)
        if examples:
            out.append(Block(fence.line, tuple(examples), page, fence.not_run))
    return out


def _pages(pages: tuple[Path, ...]) -> list[tuple[str, str]]:
    return [(page.read_text(encoding="utf-8"), page.relative_to(REPO).as_posix()) for page in pages]


def page_blocks(pages: tuple[Path, ...] = PAGES) -> list[Block]:
    """The curl blocks of every page, page by page."""
    return [block for text, name in _pages(pages) for block in blocks(text, name)]


def page_fenced(pages: tuple[Path, ...] = PAGES) -> list[Fenced]:
    """The fenced blocks of every page, page by page."""
    return [fence for text, name in _pages(pages) for fence in fenced(text, name)]


def shape(documented: str) -> Any:
    """The documented answer as JSON, each `...`/`…` value None and each trailing `, ...` dropped."""
    return json.loads(ANY.sub(" null", MORE.sub("", documented)))


def missing(expected: Any, got: Any, where: str = "") -> list[str]:
    """The documented fields (names, and the nesting of objects and lists) the answer lacks."""
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return [f"{where or 'the answer'} is not an object: {got!r}"[:300]]
        out = []
        for key, value in expected.items():
            if key not in got:
                out.append(f"{where}.{key}")
            else:
                out += missing(value, got[key], f"{where}.{key}")
        return out
    if isinstance(expected, list) and expected:
        if not isinstance(got, list) or not got:
            return [f"{where} is not a non-empty list: {got!r}"[:300]]
        return [gap for n, item in enumerate(got) for gap in missing(expected[0], item, f"{where}[{n}]")]
    return []

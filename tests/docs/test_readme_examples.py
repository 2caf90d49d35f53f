"""Every curl example of the README and docs/, run as written (the real curl, localhost:8080 the shared
stack's address) against the real stack: the status it documents (200 unless SPECIAL says) and the fields of
the answer its `# {...}` line shows. The tiny model's text is noise, so the fields are compared by
name and nesting, not value. An example that needs what the shared stack lacks is in SPECIAL, with the
reason; a block that needs a GPU, several hosts or a cluster says so in its first line (NOT_RUN) and is
skipped with that reason; any other example that fails fails here, a new one or a new page's included.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.readme_examples import FILLED, SPECIAL, Block, Example, missing, page_blocks, shape
from tests.support.shared_stack import SharedStack

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed"),
]

CURL_TIMEOUT_S = 120.0
# The file the document examples upload (`-F file=@README.md`), in the directory they run in: a few
# sentences, where the repository's README would be dozens of segments through the CPU engine.
UPLOADED = "# Printing\n\nOpen the file. Restart the printer.\n"

BLOCKS = page_blocks()


def _filled(argv: list[str], earlier: dict[str, Any] | None) -> list[str]:
    out = []
    for word in argv:
        for piece, fill in FILLED.items():
            if piece in word:
                assert earlier is not None, f"{piece} needs the answer of the example before it"
                word = word.replace(piece, fill(earlier))
        out.append(word)
    return out


def _run(
    example: Example, where: str, address: str, cwd: Path, earlier: dict[str, Any] | None
) -> tuple[int, str]:
    """The example's status and body (the file it wrote with -o, if it names one)."""
    argv = _filled(example.argv(address), earlier)
    done = subprocess.run(
        [*argv, "-w", "\n%{http_code}"], cwd=cwd, capture_output=True, text=True, timeout=CURL_TIMEOUT_S
    )
    assert done.returncode == 0, f"{where}: curl exited {done.returncode}: {done.stderr}"
    body, _, status = done.stdout.rpartition("\n")
    if "-o" in argv:
        body = (cwd / argv[argv.index("-o") + 1]).read_text(encoding="utf-8")
    return int(status), body


def _expected(example: Example) -> tuple[int, str]:
    """The status the example answers on the shared stack, and a phrase of its body ("": any)."""
    special = (s[:2] for piece, s in SPECIAL.items() if piece in example.command)
    return next(special, (200, ""))


def _check(example: Example, where: str, status: int, body: str) -> dict[str, Any] | None:
    """The example's answer as documented; returns its JSON (None if it is none) for the next one."""
    expected, phrase = _expected(example)
    assert status == expected and phrase in body, f"{where}: {status} {body[:500]}"
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if example.documented is not None:
        assert answer is not None, f"{where}: documents JSON, got {body[:300]!r}"
        assert missing(shape(example.documented), answer) == [], f"{where}: {body[:500]}"
    return answer if isinstance(answer, dict) else None


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_the_example_answers_as_documented(block: Block, shared_stack: SharedStack, tmp_path: Path) -> None:
    if block.not_run:
        pytest.skip(f"{block.name}: {block.not_run}")
    (tmp_path / "README.md").write_text(UPLOADED, encoding="utf-8")
    address = shared_stack.url.removeprefix("http://")
    earlier: dict[str, Any] | None = None
    for example in block.examples:
        where = f"{block.page} line {example.line}"
        status, body = _run(example, where, address, tmp_path, earlier)
        earlier = _check(example, where, status, body) or earlier

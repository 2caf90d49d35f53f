"""The bench's named questions: every answer kept is stamped, the index is current, no path is stale."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import ask, questions, stamp, summary
from bench.questions import QUESTIONS, Question

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"
# The index is read at a glance: the question, the figure, the target, the commit and the command.
SCREEN_LINES = 40
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


def kept() -> list[Path]:
    return sorted(p for p in RESULTS.iterdir() if p.is_dir())


def test_every_kept_answer_is_a_question_with_its_stamp() -> None:
    folders = kept()
    assert len(folders) >= 8, "the committed answers are missing"
    for folder in folders:
        assert folder.name in questions.BY_NAME, f"bench/results/{folder.name}/ answers no question"
        record = json.loads((folder / "latest.json").read_text(encoding="utf-8"))
        s = record["stamp"]
        assert set(stamp.STAMP_KEYS) <= set(s), f"{folder.name}: stamp lacks {set(stamp.STAMP_KEYS) - set(s)}"
        assert _COMMIT.match(s["commit"]), f"{folder.name}: commit {s['commit']!r}"
        assert s["command"].startswith(f"python -m bench {folder.name}"), s["command"]
        assert s["hardware"]["cores"] >= 1 and "gpus" in s["hardware"]
        assert record["question"] == folder.name and record["headline"], folder.name
        text = (folder / "latest.md").read_text(encoding="utf-8")
        assert text.startswith(f"# {folder.name}: "), folder.name
        assert f"- commit: `{s['commit']}`" in text and f"- command: `{s['command']}`" in text


def test_the_index_is_current_and_fits_a_screen() -> None:
    text = (RESULTS / "README.md").read_text(encoding="utf-8")
    assert text == summary.index(RESULTS), "stale: run `python -m bench index`"
    assert len(text.splitlines()) <= SCREEN_LINES
    for q in QUESTIONS:
        assert f"[{q.name}](" in text


# A result named as git keeps it at a commit (`git show f98fb9c:bench/results/report-full.md`).
_AT_COMMIT = re.compile(r"([0-9a-f]{7,40}):(bench/results/[\w./-]*[\w/])")


def _in_git(commit: str, path: str) -> bool:
    found = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{commit}:{path}"], capture_output=True
    )
    return found.returncode == 0


def stale_results(name: str, text: str) -> list[str]:
    """The bench results a file's text names that are not there (at the commit it names, if it names one)."""
    stale = [
        f"{name}: {commit}:{path}" for commit, path in _AT_COMMIT.findall(text) if not _in_git(commit, path)
    ]
    for found in re.findall(r"bench/results/[\w./-]*[\w/]", _AT_COMMIT.sub("", text)):
        # A placeholder (bench/results/QUESTION/latest.md) names a pattern, not a file.
        if not re.search(r"[A-Z]{3,}", found) and not (REPO / found).exists():
            stale.append(f"{name}: {found}")
    return stale


def test_no_text_in_the_repository_names_a_bench_result_that_is_gone() -> None:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True)
    stale = []
    for name in listed.stdout.splitlines():
        path = REPO / name
        if name.endswith((".md", ".json", ".py", ".j2", ".yaml", "Makefile")) and path.is_file():
            stale += stale_results(name, path.read_text(encoding="utf-8"))
    assert stale == []


def test_a_result_gone_from_the_tree_or_from_its_commit_is_stale() -> None:
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True
    )
    commit, folder = head.stdout.strip(), "bench/results" + "/"  # split, so this file names no result itself
    gone, kept_one = folder + "gone.md", folder + "README.md"
    text = f"{kept_one} {gone} {folder}QUESTION/latest.md {commit}:{kept_one} {commit}:{gone}"
    assert stale_results("x", text) == [f"x: {commit}:{gone}", f"x: {gone}"]


FAKE = Question(
    "fake", "Is this a question?", "yes", ("bench.fake", "--out", "{out}"), "r.md", "f.json", "words"
)


def test_an_answer_is_stamped_and_replaces_the_last(tmp_path: Path) -> None:
    out = tmp_path / "run"
    (out / "plots").mkdir(parents=True)
    (out / "r.md").write_text("# Old title\n\n## Headline\n\n- other\n- the words: 2x\n", encoding="utf-8")
    (out / "f.json").write_text('{"ratio": 2.0}', encoding="utf-8")
    (out / "plots" / "a.png").write_bytes(b"png")
    the_stamp = stamp.stamp(["python", "-m", "bench", "fake"])
    markdown, record = ask.answer(FAKE, out, "printed", the_stamp)
    results = tmp_path / "results"
    (results / "fake").mkdir(parents=True)
    (results / "fake" / "stale.md").write_text("old", encoding="utf-8")
    folder = ask.keep(
        Question(**{**FAKE.__dict__, "artifacts": ("plots/*.png",)}), out, markdown, record, results
    )
    assert not (folder / "stale.md").exists()
    assert (folder / "plots" / "a.png").read_bytes() == b"png"
    saved = json.loads((folder / "latest.json").read_text(encoding="utf-8"))
    assert saved["headline"] == "the words: 2x" and saved["figures"] == {"ratio": 2.0}
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True
    )
    assert saved["stamp"]["commit"] == head.stdout.strip()
    assert saved["stamp"]["command"] == "python -m bench fake"
    text = (folder / "latest.md").read_text(encoding="utf-8")
    assert text.startswith("# fake: Is this a question?\n") and "# Old title" not in text
    assert "- target: yes" in text


@pytest.mark.parametrize(
    ("text", "words", "expected"),
    [
        ("## Headline\n\n- a 1x\n- b 2x\n\n## Next\n- c words", "b", "b 2x"),
        ("## Headline\n\n- a 1x\n", "absent", "a 1x"),
        ("| target | measured |\n|---|---|\n| p50 idle | 5x |\n", "p50", "p50 idle · 5x"),
        ("round 1: 3\nmedian this: 4\nbye", "median", "median this: 4"),
        ("line one\nlast line", "", "last line"),
    ],
)
def test_the_headline_is_the_line_with_the_question_words(text: str, words: str, expected: str) -> None:
    q = Question("q", "?", "", ("m",), headline=words)
    assert questions.headline_of(q, text) == expected


def test_the_command_lists_the_questions_and_refuses_an_unknown_one() -> None:
    shown = subprocess.run([sys.executable, "-m", "bench"], cwd=REPO, capture_output=True, text=True)
    assert shown.returncode == 2
    assert all(q.name in shown.stdout for q in QUESTIONS)
    wrong = subprocess.run([sys.executable, "-m", "bench", "nope"], cwd=REPO, capture_output=True, text=True)
    assert wrong.returncode == 2 and "unknown question 'nope'" in wrong.stderr

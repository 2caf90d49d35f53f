"""Run one named question and keep its answer as bench/results/NAME/latest.md and latest.json."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.questions import Question, command, headline_of
from bench.stamp import REPO, stamp, stamp_lines

RESULTS = REPO / "bench" / "results"
RUNS = REPO / "bench" / ".runs"


def run_printing(argv: list[str]) -> tuple[int, str]:
    """Run argv from the checkout, its output shown as it comes and kept."""
    kept: list[str] = []
    with subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            kept.append(line)
    return proc.returncode, "".join(kept)


def body_of(question: Question, out: Path, printed: str) -> str:
    """The answer's Markdown: the report the run wrote (without its title), else what it printed."""
    if question.report and (out / question.report).is_file():
        text = (out / question.report).read_text(encoding="utf-8")
        return "\n".join(line for i, line in enumerate(text.splitlines()) if i or not line.startswith("# "))
    tail = "\n".join(printed.rstrip().splitlines()[-200:])
    return f"What the run printed:\n\n```\n{tail}\n```"


def figures_of(question: Question, out: Path) -> Any:
    if question.figures and (out / question.figures).is_file():
        return json.loads((out / question.figures).read_text(encoding="utf-8"))
    return None


def answer(
    question: Question, out: Path, printed: str, the_stamp: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """latest.md's text and latest.json's object for one run's outputs."""
    body = body_of(question, out, printed)
    headline = headline_of(question, body if question.report else printed)
    lines = [
        f"# {question.name}: {question.asks}",
        "",
        *stamp_lines(the_stamp),
        f"- target: {question.target}",
    ]
    record = {
        "question": question.name,
        "asks": question.asks,
        "target": question.target,
        "headline": headline,
        "figures": figures_of(question, out),
        "stamp": the_stamp,
    }
    return "\n".join([*lines, "", body.strip(), ""]), record


def keep(
    question: Question, out: Path, markdown: str, record: dict[str, Any], results: Path = RESULTS
) -> Path:
    """Replace the question's folder under results with this answer and its plots."""
    folder = results / question.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for pattern in question.artifacts:
        for found in sorted(out.glob(pattern)):
            target = folder / found.relative_to(out)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(found, target)
    (folder / "latest.md").write_text(markdown, encoding="utf-8")
    (folder / "latest.json").write_text(
        json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return folder


def ask(question: Question, extra: tuple[str, ...] = (), results: Path = RESULTS) -> int:
    """Run the question once; on success its answer replaces the one in results/."""
    out = (RUNS / f"{question.name}-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    shown = ["python", "-m", "bench", question.name, *extra]
    the_stamp = stamp(shown)
    code, printed = run_printing([sys.executable, "-m", *command(question, str(out), extra)])
    (out / "printed.txt").write_text(printed, encoding="utf-8")
    if code != 0:
        print(
            f"[bench] {question.name} failed (exit {code}); results/ unchanged; output in {out}", flush=True
        )
        return code
    markdown, record = answer(question, out, printed, the_stamp)
    folder = keep(question, out, markdown, record, results)
    print(f"[bench] {question.name}: {record['headline']} -> {folder / 'latest.md'}", flush=True)
    return 0

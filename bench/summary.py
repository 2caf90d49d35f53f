"""bench/results/README.md: one line per question, its figure, target, commit and command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.questions import QUESTIONS

# The index must fit a screen: a question's figure is cut to this many characters (latest.md has it whole).
FIGURE_CHARS = 140


def _cell(text: str) -> str:
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= FIGURE_CHARS else text[: FIGURE_CHARS - 1] + "…"


def _row(name: str, record: dict[str, Any] | None, target: str) -> str:
    if record is None:  # no folder of its answers yet: the link goes to where the question is asked
        return f"| [{name}](../questions.py) | not run yet | {target} | | `python -m bench {name}` |"
    s = record["stamp"]
    return (
        f"| [{name}]({name}/latest.md) | {_cell(record['headline'])} | {_cell(target)} | "
        f"`{s['commit']}` {s['date'][:10]} | `{s['command']}` |"
    )


def index(results: Path) -> str:
    rows = []
    for q in QUESTIONS:
        path = results / q.name / "latest.json"
        record = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        rows.append(_row(q.name, record, q.target))
    return "\n".join(
        [
            "# Bench results: one question each",
            "",
            "Each row links the question's latest answer (`latest.md`, figures in `latest.json`), stamped",
            "with its commit, command and hardware. Re-run one with its command, all with `make bench`;",
            "`python -m bench` lists the questions. Older answers live in git history.",
            "",
            "| question | figure | target | commit | command |",
            "|---|---|---|---|---|",
            *rows,
            "",
        ]
    )


def write_index(results: Path) -> Path:
    path = results / "README.md"
    path.write_text(index(results), encoding="utf-8")
    return path

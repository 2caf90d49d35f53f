"""The house rule that no function in hunyuan_serve/ or bench/ runs past 60 lines, checked on every run."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "hunyuan_serve"
# The bench keeps the package's rules: its modules are read and changed as often.
BENCH = PACKAGE.parent / "bench"
MOST_LINES = 60


def function_lengths(root: Path) -> list[tuple[int, str]]:
    """(lines, 'path:line name') of every function and method under root, longest first."""
    rows = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                rows.append((length, f"{path.relative_to(root.parent)}:{node.lineno} {node.name}"))
    return sorted(rows, reverse=True)


def test_no_function_is_longer_than_sixty_lines() -> None:
    rows = sorted(function_lengths(PACKAGE) + function_lengths(BENCH), reverse=True)
    assert any("bench/" in where for _, where in rows)
    # `pytest -s` shows the longest, the figure the architecture issue tracks.
    print("\n".join(f"{length:4d}  {where}" for length, where in rows[:8]))
    assert [row for row in rows if row[0] > MOST_LINES] == []


def test_the_measure_counts_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MOST_LINES))
    (tmp_path / "long.py").write_text(f"def long() -> None:\n{body}\n", encoding="utf-8")
    assert function_lengths(tmp_path)[0][0] == MOST_LINES + 1

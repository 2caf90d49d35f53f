"""The tests are one package tree: each helper has one import path, each test module one name."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# Fixture files of the format tests (real projects' resources), not Python the suite imports.
DATA = TESTS / "data"
# Scripts a test runs by their path, as a program of their own: the golden renderer (its command is in
# CONTRIBUTING.md and deploy/*/README.md), a server a test starts as a subprocess, and the Weblate
# driver run by the Weblate venv's Python, where `tests` is not importable.
SCRIPTS = {"edge/golden.py", "observability/one_write_server.py", "api/weblate_driver.py"}
NOT_HELPERS = {"__init__.py", "conftest.py"}


def python_files() -> list[Path]:
    return [p for p in TESTS.rglob("*.py") if DATA not in p.parents and "__pycache__" not in p.parts]


def test_every_test_folder_is_a_package() -> None:
    """Without __init__.py pytest puts the folder itself on sys.path, and a helper beside the tests is
    then importable under a bare name as well as under tests.<folder>: one module loaded twice."""
    folders = {p.parent for p in python_files()}
    missing = sorted(str(f.relative_to(TESTS.parent)) for f in folders if not (f / "__init__.py").is_file())
    assert not missing, f"test folders without __init__.py: {missing}"


def test_no_two_test_modules_share_a_name() -> None:
    names = Counter(p.name for p in python_files() if p.name.startswith("test_"))
    assert not [n for n, count in names.items() if count > 1], sorted(n for n, c in names.items() if c > 1)


def test_helpers_live_in_support() -> None:
    strays = sorted(
        rel
        for p in python_files()
        if p.name not in NOT_HELPERS and not p.name.startswith("test_")
        if (rel := p.relative_to(TESTS).as_posix()).split("/")[0] != "support" and rel not in SCRIPTS
    )
    assert not strays, f"helpers outside tests/support/ (move them there, one import path each): {strays}"


def test_no_test_imports_a_helper_by_a_bare_name() -> None:
    """`from replica_fakes import ...` worked while the folders were not packages; it must not come back."""
    helpers = {p.stem for p in (TESTS / "support").glob("*.py") if not p.name.startswith("test_")}
    bare = sorted(
        f"{p.relative_to(TESTS).as_posix()}: {line.strip()}"
        for p in python_files()
        for line in p.read_text(encoding="utf-8").splitlines()
        if line.startswith(("from ", "import ")) and line.split()[1].split(".")[0] in helpers
    )
    assert not bare, f"helpers imported by a bare name (use tests.support.NAME): {bare}"

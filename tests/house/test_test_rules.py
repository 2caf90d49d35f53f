"""Rules for the tests themselves: no skip when a module of this project fails to import, no idle sleeps."""

from __future__ import annotations

import ast
import io
import operator
import tokenize
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
# A sleep this long in a test is a wait for something: await that instead, or say why nothing can be awaited.
LONG_SLEEP_S = 0.5
_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def project_modules(repo: Path = REPO) -> set[str]:
    """Top-level names a test could import from this checkout: its packages, and the tests' own modules by
    their bare names (replica_fakes, scripted_service), as a test spelt them before tests/ was a package."""
    packages = {p.parent.name for p in repo.glob("*/__init__.py")} | {"tests"}
    return packages | {p.stem for p in (repo / "tests").rglob("*.py")}


def _const(node: ast.expr, names: dict[str, object]) -> object:
    """The value of a literal, a module-level constant, or arithmetic over them; None if not constant."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _const(node.operand, names)
        return -value if isinstance(value, int | float) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _const(node.left, names), _const(node.right, names)
        if (
            isinstance(left, int | float)
            and isinstance(right, int | float)
            and (right or not isinstance(node.op, ast.Div))
        ):
            return float(_ARITHMETIC[type(node.op)](left, right))
    return None


def _constants(tree: ast.Module) -> dict[str, object]:
    """NAME = <constant> at module level, in order (a later one may use an earlier one)."""
    names: dict[str, object] = {}
    for stmt in tree.body:
        target: ast.expr | None = stmt.target if isinstance(stmt, ast.AnnAssign) else None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if isinstance(target, ast.Name) and value is not None:
            found = _const(value, names)
            if found is not None:
                names[target.id] = found
    return names


def _sleep_names(tree: ast.Module) -> set[str]:
    """What a call to time.sleep is spelled as here: time.sleep, and `sleep` (or its alias) if imported."""
    spelled = {"time.sleep"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            spelled |= {alias.asname or alias.name for alias in node.names if alias.name == "sleep"}
        elif isinstance(node, ast.Import):
            spelled |= {
                f"{alias.asname}.sleep" for alias in node.names if alias.name == "time" and alias.asname
            }
    return spelled


def _in_loops(tree: ast.Module) -> set[int]:
    """ids of the calls inside a while or for loop: a poll's interval, between looks at its condition."""
    inside: set[int] = set()
    for loop in ast.walk(tree):
        if isinstance(loop, ast.While | ast.For | ast.AsyncFor):
            inside |= {id(node) for stmt in loop.body for node in ast.walk(stmt)}
    return inside


def _commented_lines(source: str) -> set[int]:
    return {
        tok.start[0]
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }


def long_sleeps(source: str) -> Iterator[tuple[int, float]]:
    """(line, seconds) of each time.sleep of LONG_SLEEP_S or more, outside a polling loop, that carries no
    comment on its lines or on the line above."""
    tree = ast.parse(source)
    names, spelled, polls = _constants(tree), _sleep_names(tree), _in_loops(tree)
    comments = _commented_lines(source)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) in spelled and node.args):
            continue
        seconds = _const(node.args[0], names)
        if not isinstance(seconds, int | float) or seconds < LONG_SLEEP_S or id(node) in polls:
            continue
        lines = set(range(node.lineno - 1, (node.end_lineno or node.lineno) + 1))
        if not lines & comments:
            yield node.lineno, float(seconds)


def own_importorskips(source: str, own: set[str]) -> Iterator[tuple[int, str]]:
    """(line, module) of each pytest.importorskip of a module of this project."""
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("importorskip")):
            continue
        module = (
            node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "modname"), None)
        )
        name = module.value if isinstance(module, ast.Constant) and isinstance(module.value, str) else None
        if name is None or name.split(".")[0] in own:
            yield node.lineno, str(name)


def _sources() -> Iterator[tuple[str, str]]:
    for path in sorted(TESTS.rglob("*.py")):
        yield str(path.relative_to(REPO)), path.read_text(encoding="utf-8")


def test_no_test_skips_itself_when_a_module_of_this_project_fails_to_import() -> None:
    own = project_modules()
    found = [
        f"{where}:{line}: importorskip({name!r})"
        for where, src in _sources()
        for line, name in own_importorskips(src, own)
    ]
    assert found == [], "import it plainly: a broken import must fail the suite, not skip:\n" + "\n".join(
        found
    )


def test_every_long_sleep_says_why_no_condition_can_be_awaited() -> None:
    found = [
        f"{where}:{line}: time.sleep({s:g})" for where, src in _sources() for line, s in long_sleeps(src)
    ]
    assert found == [], "wait for the condition within a deadline, or comment why none exists:\n" + "\n".join(
        found
    )


def test_the_sleep_rule_finds_literals_constants_aliases_and_spares_polls_and_comments() -> None:
    source = """
import time
from time import sleep as nap
WAIT = 0.25
LONG = WAIT * 4

def test_x():
    time.sleep(2.5)
    nap(LONG)
    time.sleep(WAIT)
    # the peer has no signal to wait on: a fixed pause is all there is
    time.sleep(3)
    time.sleep(1)  # nothing to await: the kernel's own timer
    while not done():
        time.sleep(1.0)
    time.sleep(
        0.5
    )
"""
    assert list(long_sleeps(source)) == [(8, 2.5), (9, 1.0), (16, 0.5)]


def test_the_importorskip_rule_finds_this_projects_modules_only() -> None:
    source = """
import pytest
pytest.importorskip("hunyuan_serve.replica.command", reason="x")
pytest.importorskip(modname="bench.netns")
pytest.importorskip("replica_fakes")
pytest.importorskip("playwright.sync_api")
pytest.importorskip(NAME)
"""
    own = project_modules()
    assert {"hunyuan_serve", "bench", "tests", "replica_fakes", "scripted_service"} <= own
    assert [line for line, _ in own_importorskips(source, own)] == [3, 4, 5, 7]

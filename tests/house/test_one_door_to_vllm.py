"""vLLM behind one door: only hunyuan_serve/replica/engine/ imports vllm or spells a VLLM_ variable."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "hunyuan_serve"
DOOR = ROOT / "replica" / "engine"
# A dotted path two levels into vllm or more: a qualified name vLLM or importlib resolves
# (scheduler_cls="vllm.v1.core.sched.scheduler.Scheduler"); "vllm.log", a file's name, is not one.
_QUALNAME = re.compile(r"vllm(\.\w+){2,}")
_VARIABLE = re.compile(r"VLLM_\w*")
_IMPORTERS = {"import_module", "find_spec", "__import__", "resolve_obj_by_qualname"}


def _is_vllm(module: str) -> bool:
    return module == "vllm" or module.startswith("vllm.")


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def reaches(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) for each way a module reaches vLLM: an import (function-level too), a module named
    to an importer, a string that spells VLLM_ (docstrings too) or names a vllm qualname."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, f"imports {a.name}") for a in node.names if _is_vllm(a.name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_vllm(node.module or ""):
            yield node.lineno, f"imports {node.module}"
        elif isinstance(node, ast.Call) and _called(node) in _IMPORTERS and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and _is_vllm(first.value):
                yield node.lineno, f"imports {first.value}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            spelt = _VARIABLE.search(node.value)
            if spelt:
                yield node.lineno, f"spells {spelt.group()}"
            elif _QUALNAME.fullmatch(node.value):
                yield node.lineno, f"names {node.value}"


def outside_the_door(root: Path, door: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.is_relative_to(door):
            continue
        for line, what in reaches(ast.parse(path.read_text(encoding="utf-8"))):
            found.append(f"{path.relative_to(root.parent)}:{line}: {what}")
    return found


def test_only_the_engine_package_imports_vllm_or_spells_its_variables() -> None:
    assert outside_the_door(ROOT, DOOR) == [], (
        "reach vLLM through hunyuan_serve/replica/engine/ (its variables: replica/engine/variables.py)"
    )


def test_the_door_itself_does_reach_vllm() -> None:
    # Were the package moved or renamed, the rule above would hold of nothing.
    assert any(reaches(ast.parse(p.read_text(encoding="utf-8"))) for p in DOOR.glob("*.py"))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import vllm\n", "imports vllm"),
        ("def f():\n    from vllm.sampling_params import SamplingParams\n", "imports vllm.sampling_params"),
        ("import importlib\nimportlib.import_module('vllm.envs')\n", "imports vllm.envs"),
        ("env = {'VLLM_HOST_IP': '127.0.0.1'}\n", "spells VLLM_HOST_IP"),
        ('"""Binds where VLLM_CPU_OMP_THREADS_BIND says."""\n', "spells VLLM_CPU_OMP_THREADS_BIND"),
        ("x = f'{root}/VLLM_CACHE_ROOT'\n", "spells VLLM_CACHE_ROOT"),
        ("cls = 'vllm.v1.core.sched.scheduler.Scheduler'\n", "names vllm.v1.core.sched.scheduler.Scheduler"),
    ],
)
def test_each_way_to_reach_vllm_is_found(tmp_path: Path, source: str, expected: str) -> None:
    root = tmp_path / "hunyuan_serve"
    (root / "replica" / "engine").mkdir(parents=True)
    (root / "run").mkdir()
    (root / "run" / "x.py").write_text(source, encoding="utf-8")
    (root / "replica" / "engine" / "ok.py").write_text(source, encoding="utf-8")  # inside: allowed
    # Not a way in: a distribution's name for its version, a log file's name, a comment.
    (root / "run" / "ok.py").write_text(
        "# VLLM_HOST_IP\nv = version('vllm')\nlog = 'vllm.log'\n", encoding="utf-8"
    )
    found = outside_the_door(root, root / "replica" / "engine")
    assert [f.split(": ", 1)[1] for f in found] == [expected]

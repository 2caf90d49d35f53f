"""No two modules of hunyuan_serve define a public class or function of one name, but those listed."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "hunyuan_serve"
# Names each of a kind of module defines on purpose, read through its module (`families.hunyuan_mt.build`),
# and why. A private name (`_entry`) is the module's own and never imported, so it may repeat.
DELIBERATE: dict[str, str] = {
    "main": "each program's entry point: the CLI, the client's, the settings reference's",
    "add_parser": "each command module adds its subcommand to the one parser",
    "build": "each family module's prompt builder, looked up by family",
    "translate": "each API dialect's translate route, and compat's shared core that they call",
    "languages": "each API dialect's languages route",
    "install": "auth's middleware and the OpenAPI route, each put on the replica's app by X.install(app)",
}
# `cmd_NAME`: a program's handler of its subcommand NAME; up and the gateway both have `status` and `reload`.
SUBCOMMAND = "cmd_"
DEFINED = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def definitions(root: Path) -> dict[str, list[str]]:
    """Each public class and top-level function name, with the modules that define it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, DEFINED) and not node.name.startswith("_"):
                found[node.name].append(path.relative_to(root).as_posix())
    return found


def shared(root: Path) -> dict[str, list[str]]:
    return {name: modules for name, modules in definitions(root).items() if len(set(modules)) > 1}


def test_no_two_modules_define_a_class_or_function_of_one_name() -> None:
    listed = DELIBERATE
    unlisted = {
        name: modules
        for name, modules in shared(PACKAGE).items()
        if name not in listed and not name.startswith(SUBCOMMAND)
    }
    assert unlisted == {}, "rename the less central one, saying what it is"


def test_every_deliberate_name_is_still_shared() -> None:
    assert set(DELIBERATE) - set(shared(PACKAGE)) == set(), "no longer shared: drop it from the list"


def test_a_name_defined_in_two_modules_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "class Outcome: ...\ndef _helper(): ...\ndef parse(): ...\n", encoding="utf-8"
    )
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "c.py").write_text(
        "class Outcome: ...\nasync def _helper(): ...\nclass Other:\n    def parse(self): ...\n",
        encoding="utf-8",
    )
    assert shared(tmp_path) == {"Outcome": ["a.py", "b/c.py"]}

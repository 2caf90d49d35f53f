"""Which package of hunyuan_serve may import which: the programs are peers over run/ and the pure core."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "hunyuan_serve"

# The programs: each runs on its own (a process or a command) and shares code only through the
# library packages below them, never by importing another program.
PROGRAMS = {"supervise", "gateway", "k8s", "replica", "client"}
# Who may not be imported by whom (importer -> forbidden). Function-level imports count too.
FORBIDDEN: dict[str, set[str]] = {
    # The Nginx front sits on run/ (health states, the seams) and is driven by the programs that run an
    # Nginx (supervise, gateway), render one (k8s, render_command) or answer in its error shapes
    # (replica, auth: edge/dialects.py only, see EDGE_FOR_SHAPES); it imports none of them, run/ never
    # imports it, and the client reaches it over HTTP only.
    "edge": PROGRAMS | {"render_command", "cli"},
    "run": PROGRAMS | {"render_command", "cli", "edge"},
    "supervise": PROGRAMS - {"supervise"},
    "gateway": PROGRAMS - {"gateway"},
    "k8s": PROGRAMS - {"k8s"},
    # Document jobs translate files with localization/ (the `translate` command's formats and
    # localize()) and call their replica's core in-process: never the client, an HTTP client of the front.
    "replica": (PROGRAMS - {"replica"}) | {"run"},
    "client": (PROGRAMS - {"client"}) | {"run", "edge"},
    "families": PROGRAMS | {"edge"},
    "config": PROGRAMS | {"run", "families", "edge"},
    "languages": PROGRAMS | {"run", "families", "config", "edge"},
}
# Leaves any package may import, the programs and the top-level leaves included: they import nothing of
# the project. vLLM's variable names live with the engine (the one package that spells them), and `up`'s
# plan, the Kubernetes manifests and the GPU environment name them through it.
OPEN_LEAVES = {"hunyuan_serve.replica.engine.variables"}
# Who may import only the edge's API declarations, not the rest of the front: the replica answers in
# each API's shape from the same declarations Nginx renders its own errors from; auth refuses keys so.
EDGE_FOR_SHAPES = {"replica", "auth"}

# The modules at the top of the package (and the packages without a rule above): each may import only
# the top-level modules it imports today, so a leaf stays a leaf and a new dependency is a decision.
TOP_LEVEL = {p.stem for p in ROOT.glob("*.py")} | {p.parent.name for p in ROOT.glob("*/__init__.py")}
ONLY: dict[str, set[str]] = {
    "__init__": set(),  # the version, nothing else
    "__main__": {"cli"},  # `python -m hunyuan_serve` is the CLI
    # The subcommands' modules are named in COMMAND_MODULES and imported by name.
    "cli": {"config", "open_files"},
    "open_files": set(),  # every command's open-files limit, raised before any starts a child
    "cores": set(),
    "gpu": set(),
    "sqlite_in": set(),
    "private_files": set(),  # a leaf: every reader of a secret file asks it
    "demo_model": set(),  # models imports it, so it must not import models back
    "templating": set(),
    # How a text is cut (placeholders, long texts into segments): pure, shared by the client and replica.
    "text": set(),
    # Files localized segment by segment (their formats, the pipeline, its cache): the `translate`
    # command's and the replica's document jobs', each handing it its own translation service.
    "localization": {"families", "sqlite_in", "text"},
    "detect": {"languages"},
    # The answer checks are pure: their thresholds from the config, the language detector's model.
    "qa": {"config", "detect", "languages"},
    "logrotate": {"config"},
    "auth": {"config", "edge", "private_files"},  # keys from the config, refusals in each API's shape
    "cache": {"config", "sqlite_in"},
    "storage": {"cache", "config"},  # the cache's Redis settings and client: one connection setup
    # Translation memories' files and similarity over the store's units; `memory` the command.
    "memory": {"auth", "config", "languages", "storage"},
    "models": {"config", "demo_model", "families"},
    "tiny_model": {"families"},
    "systemd_unit": {"config", "templating"},
    # `doctor` checks what `up` will place: ports and plans, GPUs, models, the replica's device environment,
    # the edge's TLS pair (edge/tls.py, the one check of it that `up` runs too) and the secret files'
    # modes (auth/secret_files.py, the check up, replica and gateway share), and whether the demo model
    # is converted yet (demo_model.py, where `up` keeps it).
    "doctor": {"config", "run", "gpu", "models", "replica", "compile_cache", "edge", "auth", "demo_model"},
    # The first compile's cache paths (the replica sets them) and doctor's rows on it, built as doctor's.
    "compile_cache": {"config", "doctor"},
    # `render` writes what `up` and k8s would run: it composes them, nobody imports it.
    "render_command": {"config", "edge", "run", "k8s", "supervise", "systemd_unit"},
}
FORBIDDEN.update({name: TOP_LEVEL - allowed for name, allowed in ONLY.items()})


# The top-level trees: tests may import bench (its helpers: netns, pool stubs), never the other way round:
# a benchmark runs from a checkout without the test suite's support code in its way.
TREES: dict[str, set[str]] = {"hunyuan_serve": {"tests", "bench"}, "bench": {"tests"}}


def _package(root: Path, path: Path) -> str:
    return path.relative_to(root).with_suffix("").parts[0]


def _open_leaves_only(node: ast.ImportFrom) -> bool:
    module = node.module or ""
    return module in OPEN_LEAVES or all(f"{module}.{alias.name}" in OPEN_LEAVES for alias in node.names)


def _imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hunyuan_serve"):
            if _open_leaves_only(node):
                continue
            if node.module == "hunyuan_serve":
                yield from ((node.lineno, alias.name) for alias in node.names)
            else:
                yield node.lineno, node.module.split(".")[1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("hunyuan_serve.") and alias.name not in OPEN_LEAVES:
                    yield node.lineno, alias.name.split(".")[1]


def violations(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        importer = _package(root, path)
        for line, target in _imported(ast.parse(path.read_text(encoding="utf-8"))):
            if target != importer and target in FORBIDDEN.get(importer, set()):
                found.append(f"{path.relative_to(root.parent)}:{line}: {importer} imports {target}")
    return found


def _edge_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module of edge/) for each import of one, `from hunyuan_serve.edge import x` included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "hunyuan_serve.edge":
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hunyuan_serve.edge."):
            yield node.lineno, (node.module or "").split(".")[2]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("hunyuan_serve.edge."):
                    yield node.lineno, alias.name.split(".")[2]


def edge_violations(root: Path) -> list[str]:
    """Imports of an edge module other than dialects by a package that may use only the error shapes."""
    found = []
    for path in sorted(root.rglob("*.py")):
        importer = _package(root, path)
        if importer not in EDGE_FOR_SHAPES:
            continue
        for line, module in _edge_modules(ast.parse(path.read_text(encoding="utf-8"))):
            if module != "dialects":
                found.append(f"{path.relative_to(root.parent)}:{line}: {importer} imports edge.{module}")
    return found


def _top_level(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module.split(".")[0]
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name.split(".")[0]) for alias in node.names)


def tree_violations(repo: Path) -> list[str]:
    found = []
    for importer, forbidden in TREES.items():
        for path in sorted((repo / importer).rglob("*.py")):
            for line, target in _top_level(ast.parse(path.read_text(encoding="utf-8"))):
                if target in forbidden:
                    found.append(f"{path.relative_to(repo)}:{line}: {importer} imports {target}")
    return found


def test_no_package_imports_what_its_rules_forbid() -> None:
    assert violations(ROOT) == []


def test_the_replica_and_auth_take_only_the_error_shapes_from_the_edge() -> None:
    assert edge_violations(ROOT) == []


@pytest.mark.parametrize(
    ("rel", "source", "expected"),
    [
        (
            "replica/x.py",
            "from hunyuan_serve.edge.render import render_nginx\n",
            "replica imports edge.render",
        ),
        ("auth/x.py", "def f():\n    from hunyuan_serve.edge import layout\n", "auth imports edge.layout"),
    ],
)
def test_an_edge_import_past_the_shapes_is_reported(
    tmp_path: Path, rel: str, source: str, expected: str
) -> None:
    root = tmp_path / "hunyuan_serve"
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(source, encoding="utf-8")
    (root / "replica").mkdir(exist_ok=True)
    (root / "replica" / "ok.py").write_text(
        "from hunyuan_serve.edge.dialects import NATIVE\n", encoding="utf-8"
    )
    assert [v.split(": ", 1)[1] for v in edge_violations(root)] == [expected]


def test_bench_and_the_package_never_import_the_tests() -> None:
    assert tree_violations(REPO) == []


@pytest.mark.parametrize(
    ("rel", "source", "expected"),
    [
        ("bench/x.py", "from tests.support import netns\n", "bench imports tests"),
        ("bench/x.py", "def f():\n    import tests.support.stacks\n", "bench imports tests"),
        ("hunyuan_serve/x.py", "from bench.procs import free_port\n", "hunyuan_serve imports bench"),
    ],
)
def test_a_forbidden_tree_import_is_reported(tmp_path: Path, rel: str, source: str, expected: str) -> None:
    for tree in TREES:
        (tmp_path / tree).mkdir()
    (tmp_path / rel).write_text(source, encoding="utf-8")
    allowed = "from hunyuan_serve.config import ServeConfig\n"
    (tmp_path / "bench" / "ok.py").write_text(allowed, encoding="utf-8")
    assert [v.split(": ", 1)[1] for v in tree_violations(tmp_path)] == [expected]


@pytest.mark.parametrize(
    ("rel", "source", "expected"),
    [
        ("gateway/x.py", "from hunyuan_serve.supervise.command import x\n", "gateway imports supervise"),
        ("run/x.py", "def f():\n    from hunyuan_serve import gateway\n", "run imports gateway"),
        ("k8s/x.py", "import hunyuan_serve.supervise.plan\n", "k8s imports supervise"),
        ("edge/x.py", "from hunyuan_serve.gateway.loop import Gateway\n", "edge imports gateway"),
        ("run/x.py", "from hunyuan_serve.edge.routing import Routing\n", "run imports edge"),
        ("client/x.py", "from hunyuan_serve.edge import dialects\n", "client imports edge"),
        ("run/x.py", "from hunyuan_serve.replica.engine import args, variables\n", "run imports replica"),
        # Document jobs call their replica's core; the file pipeline takes any service, never the client.
        (
            "replica/x.py",
            "from hunyuan_serve.client.api import AsyncTranslateClient\n",
            "replica imports client",
        ),
        (
            "localization/x.py",
            "def f():\n    from hunyuan_serve.client import api\n",
            "localization imports client",
        ),
    ],
)
def test_a_forbidden_import_is_reported(tmp_path: Path, rel: str, source: str, expected: str) -> None:
    """The check itself fails on a violation, function-level imports included."""
    root = tmp_path / "hunyuan_serve"
    (root / rel).parent.mkdir(parents=True)
    (root / rel).write_text(source, encoding="utf-8")
    (root / "run").mkdir(exist_ok=True)
    (root / "run" / "ok.py").write_text("from hunyuan_serve.config import ServeConfig\n", encoding="utf-8")
    assert [v.split(": ", 1)[1] for v in violations(root)] == [expected]


def test_every_top_level_module_has_a_rule() -> None:
    assert sorted(TOP_LEVEL - set(FORBIDDEN)) == []


def test_a_leaf_that_imports_the_package_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "hunyuan_serve"
    root.mkdir()
    (root / "cores.py").write_text("from hunyuan_serve.config import ServeConfig\n", encoding="utf-8")
    (root / "detect.py").write_text("from hunyuan_serve.languages import AUTO\n", encoding="utf-8")
    assert [v.split(": ", 1)[1] for v in violations(root)] == ["cores imports config"]


def test_an_open_leaf_may_be_imported_by_any_package(tmp_path: Path) -> None:
    root = tmp_path / "hunyuan_serve"
    for rel, source in [
        ("run/a.py", "from hunyuan_serve.replica.engine import variables\n"),
        ("k8s/b.py", "from hunyuan_serve.replica.engine.variables import CACHE_ROOT\n"),
        ("gpu.py", "import hunyuan_serve.replica.engine.variables\n"),
    ]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(source, encoding="utf-8")
    assert violations(root) == []


@pytest.mark.parametrize("leaf", sorted(OPEN_LEAVES))
def test_an_open_leaf_imports_nothing_of_the_project(leaf: str) -> None:
    path = REPO / (leaf.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert [target for _, target in _top_level(tree) if target == "hunyuan_serve"] == []

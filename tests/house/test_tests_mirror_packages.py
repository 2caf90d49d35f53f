"""The tests' folders mirror the package: each package of hunyuan_serve/ has its tests in tests/<package>/."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "hunyuan_serve"
TESTS = REPO / "tests"
# Folders whose tests cross packages on purpose: a whole API through the stack, a deployment, a rule.
CROSS_CUTTING = {
    "api": "an API dialect through the real stack",
    "bench": "the bench's own logic",
    "container": "the container images (make image-test)",
    "demo": "the embedded demo model",
    "docs": "the README's and docs/' examples, links and settings page",
    "gpu": "the GPU placement and environment",
    "house": "rules for the code and the tests",
    "multihost": "several hosts in network namespaces",
    "observability": "metrics, logs and Prometheus",
    "support": "the test harness itself",
    "toplevel": "hunyuan_serve's top-level modules",
}
# Packages that hold no Python of their own: templates and the web page's static files.
NO_PYTHON = {"templates", "web"}


def packages() -> set[str]:
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def test_every_package_has_a_tests_folder_of_its_name() -> None:
    found = packages()
    assert {"edge", "run", "supervise", "replica", "client"} <= found
    missing = sorted(name for name in found - NO_PYTHON if not (TESTS / name).is_dir())
    assert not missing, f"packages without tests/<name>/: {missing}"


def test_every_tests_folder_is_a_package_or_a_named_cross_cutting_group() -> None:
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert folders, "no test folders found"
    strays = sorted(folders - packages() - set(CROSS_CUTTING))
    assert not strays, f"test folders that name no package nor a cross-cutting group: {strays}"

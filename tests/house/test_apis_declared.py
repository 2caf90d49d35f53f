"""Every API router is reached through a declaration, and every operation it documents has its facts."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from hunyuan_serve.edge.dialects import DIALECTS, REFERENCE_SCHEMA, Dialect
from hunyuan_serve.replica.apis import registry

ROOT = Path(__file__).resolve().parents[2] / "hunyuan_serve"


def _routers_made(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, name) of each module-level `name = APIRouter(...)`."""
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "APIRouter":
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield from ((node.lineno, t.id) for t in targets if isinstance(t, ast.Name))


def unreached_routers(root: Path) -> list[str]:
    """Each router of the package that no declaration's module exports in its ROUTERS."""
    exported = {(each.name, id(router)) for each in registry.served() for router in each.routers}
    found = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        for line, name in _routers_made(ast.parse(path.read_text(encoding="utf-8"))):
            router = getattr(importlib.import_module(module), name)
            if (module, id(router)) not in exported:
                found.append(f"{path.relative_to(root.parent)}:{line}: {name}")
    return found


def test_every_router_is_in_the_routers_of_a_module_a_declaration_names() -> None:
    # A router missing here is never mounted: add it to its module's ROUTERS, and the module to its
    # API's `modules` (edge/dialects.py).
    assert unreached_routers(ROOT) == []


def test_the_scan_finds_as_many_routers_as_the_declared_modules_export() -> None:
    # A scan that found none would pass the test above without checking anything; a module named twice
    # would have its routers mounted twice.
    made = sum(len(list(_routers_made(ast.parse(p.read_text(encoding="utf-8"))))) for p in ROOT.rglob("*.py"))
    assert made == sum(len(each.routers) for each in registry.served())
    names = [each.name for each in registry.served()]
    assert len(names) == len(set(names))


def _routes(served: registry.Served) -> Iterator[APIRoute]:
    for router in served.routers:
        yield from (route for route in router.routes if isinstance(route, APIRoute))


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
def test_each_apis_modules_serve_its_declared_routes_and_no_other(dialect: Dialect) -> None:
    served: dict[str, set[str]] = {}
    for each in registry.served():
        if each.dialect is dialect:
            for route in _routes(each):
                served.setdefault(route.path, set()).update(route.methods - {"HEAD"})
    declared = {path: set(methods) for path, methods in dialect.routes.items() if path != REFERENCE_SCHEMA}
    assert served == declared  # FastAPI serves the document itself (openapi_url)


def _documented(path: str) -> str:
    """A route's path as the OpenAPI document names it: {name:path} is {name} there."""
    return re.sub(r"\{(\w+):\w+\}", r"{\1}", path)


@pytest.mark.parametrize("served", registry.served(), ids=lambda s: s.name.rsplit(".", 1)[-1])
def test_each_documented_operation_has_its_facts_in_its_module(served: registry.Served) -> None:
    documented = {
        (method.lower(), _documented(route.path))
        for route in _routes(served)
        if route.include_in_schema
        for method in route.methods - {"HEAD"}
    }
    # Facts for an operation the module has no route for would describe nothing: a stale entry.
    assert set(served.operations) == documented

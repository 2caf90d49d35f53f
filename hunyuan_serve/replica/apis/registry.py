"""The modules each API's declaration names (edge/dialects.py), imported: their routers and operations."""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

from fastapi import APIRouter

from hunyuan_serve.edge.dialects import DIALECTS, Dialect
from hunyuan_serve.replica.openapi.operations import Op, Operations


@dataclass(frozen=True)
class Served:
    """One module serving an API: its name, the API whose declaration names it, its routers and what
    the OpenAPI document says of each of its operations."""

    name: str
    dialect: Dialect
    routers: tuple[APIRouter, ...]
    operations: Operations


@functools.cache
def served() -> tuple[Served, ...]:
    """Every module the declarations name, in their order: the app mounts their routers so."""
    found = []
    for dialect in DIALECTS:
        for name in dialect.modules:
            module = importlib.import_module(name)
            found.append(Served(name, dialect, tuple(module.ROUTERS), module.OPERATIONS))
    return tuple(found)


def operations() -> dict[tuple[str, str], Op]:
    """What the OpenAPI document says of each operation, from the module serving it."""
    return {key: op for each in served() for key, op in each.operations.items()}

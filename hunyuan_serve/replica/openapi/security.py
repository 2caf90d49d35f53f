"""The OpenAPI document's key schemes: each operation's, from its API's declaration (edge/dialects.py)."""

from __future__ import annotations

import re
from typing import Any

from hunyuan_serve.edge.dialects import Dialect, dialect_of, is_open

Schema = dict[str, Any]


def _scheme(name: str) -> tuple[str, Schema]:
    """An Authorization scheme as OpenAPI declares it: HTTP's own (Bearer, Basic), else a header key."""
    if name.lower() in ("bearer", "basic"):
        return name.lower(), {"type": "http", "scheme": name.lower()}
    described = f"`Authorization: {name} KEY`"
    key = {"type": "apiKey", "in": "header", "name": "Authorization", "description": described}
    return re.sub(r"[^a-z0-9]+", "_", name.lower()), key


def _schemes(dialect: Dialect) -> list[tuple[str, Schema]]:
    """How this API's clients send a key (its declaration's `keys`), and ?token=, which every API takes."""
    named = [_scheme(name) for name in dialect.keys.schemes]
    named += [_scheme("Basic")] if dialect.keys.basic else []
    return [*named, ("token", {"type": "apiKey", "in": "query", "name": "token"})]


def declare_keys(spec: Schema) -> None:
    """With a keys file: each operation's key schemes, its API's (?api_key= and a LibreTranslate
    body's api_key also do)."""
    schemes = spec["components"].setdefault("securitySchemes", {})
    for path, item in spec["paths"].items():
        if is_open(path):
            continue
        named = _schemes(dialect_of(path))
        schemes.update(named)
        for operation in item.values():
            operation["security"] = [{name: []} for name, _ in named]

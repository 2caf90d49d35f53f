"""Strict Jinja environments over a package's own templates (its `templates/` folder)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jinja2


def strict_environment(package: str, **filters: Callable[..., Any]) -> jinja2.Environment:
    """The package's templates; an undefined variable is an error, never an empty string."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=False,  # loaded once: `up` never re-reads a template file changed under it
    )
    env.filters.update(filters)
    return env

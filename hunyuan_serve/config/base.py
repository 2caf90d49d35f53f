"""The base of every config section, the config error, and how validation problems are worded."""

from __future__ import annotations

from collections.abc import Sequence

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
)


class ConfigError(ValueError):
    """A configuration that cannot be used, with a message naming the bad key."""


class SecretFileError(ConfigError):
    """A secret file others may read or write: refused like any setting to fix, so every command that
    checks one (up, reload, replica, gateway, doctor) exits 2 on it (docs/security.md)."""


class Section(BaseModel):
    """Base of every config section: frozen, unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def error_key(loc: Sequence[int | str]) -> str:
    """A pydantic error location as the file's key, e.g. replica.cache_path or hosts[1].url."""
    key = ""
    for part in loc:
        key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else str(part))
    return key


def validation_problems(err: ValidationError) -> str:
    """Every problem on one line, each after its key; a check across keys names its keys itself."""
    problems = []
    for item in err.errors():
        # A YAML list is validated as a tuple: say what the file should hold.
        message = "should be a list" if item["type"] == "tuple_type" else item["msg"]
        message = message.removeprefix("Value error, ")
        key = error_key(item["loc"])
        problems.append(f"{key}: {message}" if key else message)
    return "; ".join(problems)


def yaml_problem(err: yaml.YAMLError) -> str:
    """PyYAML's report (several lines, with a caret drawing) as one line: what, and where."""
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{getattr(err, 'problem', None) or err}{where}"


def format_error(err: ValidationError) -> str:
    return "invalid config: " + validation_problems(err)

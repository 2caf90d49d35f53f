"""The base of every config section, the config error, and how validation problems are worded."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from typing import Any, get_args

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


def _sections(root: type[BaseModel] = BaseModel) -> Iterator[type[BaseModel]]:
    for sub in root.__subclasses__():
        yield sub
        yield from _sections(sub)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, itself or inside tuple[X, ...], dict[str, X] or X | None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in map(_model_in, get_args(annotation)) if m is not None), None)


def known_keys(title: str, loc: Sequence[int | str]) -> list[str]:
    """The keys the model named `title` (a ValidationError's) accepts where loc (an error's location, its
    last part the key refused) points: each section's fields, list indexes and mapping keys stepped over."""
    model = next((m for m in _sections() if m.__name__ == title), None)
    for part in loc[:-1]:
        if model is not None and isinstance(part, str) and part in model.model_fields:
            model = _model_in(model.model_fields[part].annotation)
    return list(model.model_fields) if model is not None else []


# Keys a release took away, each with what to do about it: a config file written for an older release
# is told that, not "unknown key".
RETIRED_KEYS = {
    "document_front_url": "no longer a setting: a replica's document jobs call its translation core "
    "in-process, not a front over HTTP; delete this key",
}


def unknown_key(key: str, known: Sequence[str]) -> str:
    """An unknown key's message, with the closest key accepted there when one is close (a typo)."""
    if key in RETIRED_KEYS and key not in known:
        return RETIRED_KEYS[key]
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f"unknown key (did you mean {close[0]}?)" if close else "unknown key"


def validation_problems(err: ValidationError) -> str:
    """Every problem on one line, each after its key; a check across keys names its keys itself."""
    problems = []
    for item in err.errors():
        # A YAML list is validated as a tuple: say what the file should hold.
        message = "should be a list" if item["type"] == "tuple_type" else item["msg"]
        if item["type"] == "extra_forbidden" and item["loc"]:  # pydantic's "Extra inputs are not permitted"
            message = unknown_key(str(item["loc"][-1]), known_keys(err.title, item["loc"]))
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

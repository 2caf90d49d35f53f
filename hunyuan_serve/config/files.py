"""Config files: the run dir default, YAML reading and writing, merging a file with overrides."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    ValidationError,
)

from hunyuan_serve.config.base import ConfigError, format_error, yaml_problem
from hunyuan_serve.config.serve import ServeConfig


def default_run_dir(environ: Mapping[str, str]) -> Path:
    """The run directory `up` and `status` agree on when none is given."""
    if "HUNYUAN_SERVE_RUN_DIR" in environ:
        return Path(environ["HUNYUAN_SERVE_RUN_DIR"])
    if "XDG_RUNTIME_DIR" in environ:
        return Path(environ["XDG_RUNTIME_DIR"]) / "hunyuan-serve"
    return Path("/tmp") / f"hunyuan-serve-{os.getuid()}"


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def build_config(file_data: Mapping[str, Any] | None, overrides: Mapping[str, Any]) -> ServeConfig:
    """Merge a parsed YAML mapping with CLI overrides (dotted keys) and validate."""
    nested: dict[str, Any] = {}
    for dotted, value in overrides.items():
        node = nested
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    data = _deep_merge(dict(file_data or {}), nested)
    try:
        return ServeConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_error(err)) from None


def read_yaml(path: str | Path, what: str) -> Any:
    """A YAML file parsed; its errors on one line, naming what it is (config, inventory) and the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read {what} {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not UTF-8 text") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{what} {path} is not valid YAML: {yaml_problem(err)}") from None


def load_config_file(path: str | Path | None) -> dict[str, Any]:
    """Read a YAML config file into a mapping; errors name the file."""
    if path is None:
        return {}
    data = read_yaml(path, "config")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {path} must be a mapping at the top level")
    return data


def config_to_yaml(cfg: ServeConfig) -> str:
    """The effective config as YAML that load_config_file reads back to the same model."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True)

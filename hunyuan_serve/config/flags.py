"""CLI flags generated from the config model, so each option is declared once."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from hunyuan_serve.config.base import ConfigError, Section
from hunyuan_serve.config.devices import parse_gpus
from hunyuan_serve.config.edge import AuthConfig, NginxConfig
from hunyuan_serve.config.engine import EngineConfig
from hunyuan_serve.config.files import build_config, load_config_file
from hunyuan_serve.config.operations import LogsConfig, SupervisorConfig
from hunyuan_serve.config.replica import ReplicaConfig
from hunyuan_serve.config.serve import POOL_NAME, ServeConfig

# -- CLI flags generated from the model, so each option is declared once -----------------------

_SECTIONS: dict[str, type[Section]] = {
    "engine": EngineConfig,
    "replica": ReplicaConfig,
    "supervisor": SupervisorConfig,
    "nginx": NginxConfig,
    "auth": AuthConfig,
    "logs": LogsConfig,
}


def _shared_fields(sections: dict[str, type[Section]]) -> set[str]:
    """Field names more than one section declares (nginx.tls_cert beside replica.tls_cert)."""
    seen: dict[str, int] = {}
    for section in sections.values():
        for name in section.model_fields:
            seen[name] = seen.get(name, 0) + 1
    return {name for name, count in seen.items() if count > 1}


# Flags whose short name would be ambiguous across sections get the section as prefix: every name two
# sections share, found rather than listed, so a new field can never make two flags collide; and a
# few whose bare name would read as the whole service's (--host, --listen, --binary).
_AMBIGUOUS = {"host", "listen", "binary"} | _shared_fields(_SECTIONS)


def _flag_name(section: str | None, field: str) -> str:
    if section is None:
        return field
    if field in _AMBIGUOUS:
        return f"{section}_{field}"
    return field


def _bool_arg(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


POOL_FLAG = "NAME=MODEL[:replicas=N][:gpus=0,1]"
_POOL_OPTIONS = ("replicas", "gpus")


def pool_from_flag(text: str) -> dict[str, Any]:
    """One `--pool NAME=MODEL[:replicas=N][:gpus=0,1]` as an entry of `pools`; a ConfigError names the
    flag and the part that is wrong."""

    def bad(part: str, why: str) -> ConfigError:
        return ConfigError(f"--pool {text!r}: {part}: {why} (expected {POOL_FLAG})")

    name, sep, rest = text.partition("=")
    if not sep:
        raise bad(repr(text), "no '=' between the pool's name and its model")
    if not POOL_NAME.match(name):
        raise bad(f"name {name!r}", "lowercase letters, digits and '-', a letter first, at most 31")
    model, *options = rest.split(":")
    if not model.strip():
        raise bad("model", "empty")
    pool: dict[str, Any] = {"name": name, "model": model.strip()}
    for option in options:
        key, has_value, value = option.partition("=")
        if key not in _POOL_OPTIONS or not has_value:
            raise bad(repr(option), "not replicas=N or gpus=0,1")
        if key in pool:
            raise bad(repr(option), f"{key} given twice")
        if key == "replicas":
            if not value.isdigit() or int(value) < 1:
                raise bad(repr(option), "replicas is a whole number >= 1")
            pool["replicas"] = int(value)
            continue
        try:
            gpus = parse_gpus(value)
        except ValueError as err:
            raise bad(repr(option), str(err)) from None
        if gpus is None:
            raise bad(repr(option), "name the pool's devices, e.g. gpus=0,1")
        pool["gpus"] = list(gpus)
    return pool


def add_config_flags(parser: argparse.ArgumentParser, sections: Sequence[str]) -> None:
    """Add one --flag per field of the named sections ('top' is ServeConfig's own fields)."""
    parser.add_argument("--config", metavar="FILE", help="YAML config file; flags override it.")
    for section in sections:
        model: type[Section] = ServeConfig if section == "top" else _SECTIONS[section]
        group = parser.add_argument_group(f"{section} options")
        for name, field in model.model_fields.items():
            if name in _SECTIONS:
                continue
            if section == "top" and name == "pools":  # a list of sections: one repeatable flag per pool
                group.add_argument(
                    "--pool",
                    dest="pools",
                    action="append",
                    default=argparse.SUPPRESS,
                    metavar=POOL_FLAG,
                    help="A pool: its model, on CPU its replicas, on GPUs its devices; repeat per pool "
                    "(replaces the file's pools; the other flags are every pool's settings).",
                )
                continue
            flag = "--" + _flag_name(None if section == "top" else section, name).replace("_", "-")
            dest = name if section == "top" else f"{section}.{name}"
            annotation = str(field.annotation)
            kwargs: dict[str, Any] = {"dest": dest, "default": argparse.SUPPRESS, "help": field.description}
            if annotation in ("<class 'bool'>", "bool | None"):
                kwargs.update(nargs="?", const=True, type=_bool_arg, metavar="BOOL")
            else:
                kwargs["metavar"] = name.upper()
            group.add_argument(flag, **kwargs)


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The config keys the user set on the command line (pydantic coerces the strings)."""
    skip = {"config", "command", "func"}
    overrides = {key: value for key, value in vars(args).items() if key not in skip and _is_config_key(key)}
    if "pools" in overrides:  # --pool texts, parsed here so that a bad one is a ConfigError (exit 2)
        overrides["pools"] = [p if isinstance(p, dict) else pool_from_flag(p) for p in overrides["pools"]]
    return overrides


def _is_config_key(key: str) -> bool:
    if "." in key:
        section, name = key.split(".", 1)
        return section in _SECTIONS and name in _SECTIONS[section].model_fields
    return key in ServeConfig.model_fields


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    """Load --config and apply the flags given, as every command that takes config does."""
    return build_config(load_config_file(getattr(args, "config", None)), overrides_from_args(args))

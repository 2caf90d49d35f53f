"""The `hunyuan-serve` command: one subcommand per module, each declaring its own parser."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from hunyuan_serve import __version__
from hunyuan_serve.config import ConfigError

# Each module defines add_parser(subparsers) and sets `func` (args -> exit code) on its parser.
# Modules are imported here only for their parsers: heavy imports (vllm, torch) stay inside `func`.
COMMAND_MODULES = (
    "hunyuan_serve.supervise.flags",  # up, status, reload, config
    "hunyuan_serve.render_command",  # render nginx / systemd / k8s
    "hunyuan_serve.replica.command",  # replica
    "hunyuan_serve.tiny_model",  # tiny-model
    "hunyuan_serve.demo_model",  # demo-model
    "hunyuan_serve.client.cli",  # translate
    "hunyuan_serve.families.command",  # prompt
    "hunyuan_serve.doctor",  # doctor
    "hunyuan_serve.gateway.command",  # gateway, gateway status
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hunyuan-serve", description="Serve Hunyuan-MT translation behind Nginx, supervised."
    )
    parser.add_argument("--version", action="version", version=f"hunyuan-serve {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as err:
        print(f"hunyuan-serve: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130

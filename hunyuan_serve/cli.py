"""The `hunyuan-serve` command: one subcommand per module, each declaring its own parser."""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from collections.abc import Sequence

from hunyuan_serve import __version__
from hunyuan_serve.config import ConfigError
from hunyuan_serve.open_files import raise_soft_limit

# Each module defines add_parser(subparsers) and sets `func` (args -> exit code) on its parser.
# Modules are imported here only for their parsers: heavy imports (vllm, torch) stay inside `func`.
# How alike a mistyped flag and a real one must be (difflib's ratio) for the refusal to suggest it: 0.75
# takes --prot for --port and --max-token for --max-tokens, and leaves a flag of another program alone.
CLOSE_FLAG = 0.75
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
    "hunyuan_serve.memory.command",  # memory import|export|list|delete
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


def closest_flag(arg: str, flags: Sequence[str]) -> str | None:
    """The flag a mistyped one most likely meant: by spelling, the typed one also read without a leading
    section word (--replica-max-tokens for --max-tokens: only flags shared by sections carry one)."""
    name = arg.split("=")[0]
    variants = [name, "--" + name[2:].split("-", 1)[-1]]
    scored = [(difflib.SequenceMatcher(None, v, flag).ratio(), flag) for v in variants for flag in flags]
    ratio, flag = max(scored, default=(0.0, ""))
    return flag if ratio >= CLOSE_FLAG else None


def unrecognized(parser: argparse.ArgumentParser, command: str, extra: Sequence[str]) -> str:
    """argparse's refusal of arguments no flag takes, with the command's closest flag for a mistyped one."""
    parsers = [parser] + [
        action.choices[command]
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction) and command in action.choices
    ]
    flags = [f for p in parsers for a in p._actions for f in a.option_strings if f.startswith("--")]
    hints = [(arg.split("=")[0], closest_flag(arg, flags)) for arg in extra if arg.startswith("--")]
    said = "".join(f"; {typed}: did you mean {flag}?" for typed, flag in hints if flag)
    return f"unrecognized arguments: {' '.join(extra)}{said}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        parser.error(unrecognized(parser, args.command, extra))  # exit 2, as argparse's own refusal
    raise_soft_limit()  # before any command starts Nginx or a replica, which inherit it
    try:
        return int(args.func(args) or 0)
    except ConfigError as err:
        print(f"hunyuan-serve: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130

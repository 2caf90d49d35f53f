"""The flags of `up`, `status`, `reload` and `config`: every config option, from its one declaration."""

from __future__ import annotations

import argparse

from hunyuan_serve.config import add_config_flags
from hunyuan_serve.supervise.command import cmd_config, cmd_status, cmd_up
from hunyuan_serve.supervise.reload_client import cmd_reload

ALL_SECTIONS = ("top", "engine", "replica", "supervisor", "nginx", "auth", "logs")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = subparsers.add_parser("up", help="Start replicas behind Nginx and supervise them (Ctrl-C stops).")
    serve_flags(up)
    up.set_defaults(func=cmd_up)

    status = subparsers.add_parser("status", help="Show the replicas of the running `up`.")
    status.add_argument("--run-dir", help="Run directory of that `up` (default: the per-user one).")
    status.add_argument("--config", metavar="FILE", help="Take the run directory from this config file.")
    status.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
    status.set_defaults(func=cmd_status)

    reload = subparsers.add_parser(
        "reload", help="Re-read the running `up`'s config and replace its replicas one at a time."
    )
    reload.add_argument("--run-dir", help="Run directory of that `up` (default: the per-user one).")
    reload.add_argument(
        "--config", metavar="FILE", help="The file `up` was started with (finds its run dir)."
    )
    reload.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="Seconds to wait for the outcome (supervisor.reload_wait_timeout_s).",
    )
    reload.set_defaults(func=cmd_reload)

    config = subparsers.add_parser("config", help="Print the effective config (file + flags) as YAML.")
    serve_flags(config)
    config.set_defaults(func=cmd_config)


def serve_flags(parser: argparse.ArgumentParser) -> None:
    add_config_flags(parser, ALL_SECTIONS)
    parser.add_argument("--port", dest="nginx.port", default=argparse.SUPPRESS, help="Same as --nginx-port.")

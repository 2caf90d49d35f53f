"""Every `--flag` the README and docs/ name for hunyuan-serve is one of its commands' flags: in inline
code, and after `hunyuan-serve` on a command line of a code block (so no page names a flag the parser
refuses, such as a --nginx-tls-host for --tls-host)."""

from __future__ import annotations

import argparse
import re

from hunyuan_serve.cli import build_parser
from tests.support.readme_examples import PAGES, REPO

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
COMMAND_LINE = re.compile(r"^[ \t]*(?:\S*/)?hunyuan-serve[ \t]+([^#|\n]*)", re.M)
# Inline code naming another program's flag, by the flag, and whose it is.
OTHER_TOOLS = {
    "--check": "msgfmt's",
    "--only": "make bench ARGS=, the benchmarks' own",
    "--build-arg": "podman build's",
    "--width-off": "bench/fairness.py's",
}


def known_flags(parser: argparse.ArgumentParser) -> set[str]:
    """Every long option of the parser and of its subcommands, all the way down."""
    found: set[str] = set()
    for action in parser._actions:
        found.update(o for o in action.option_strings if o.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= known_flags(sub)
    return found


def named_flags() -> list[tuple[str, str]]:
    """(page, flag) for each flag the pages name for hunyuan-serve."""
    named = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        where = page.relative_to(REPO).as_posix()
        for block in FENCE.findall(text):
            lines = COMMAND_LINE.findall(block.replace("\\\n", " "))  # a command continued by \ is one
            named += [(where, flag) for line in lines for flag in FLAG.findall(line)]
        prose = FENCE.sub("", text)
        named += [(where, flag) for span in SPAN.findall(prose) for flag in FLAG.findall(span)]
    return [(where, flag) for where, flag in named if flag not in OTHER_TOOLS]


def test_every_flag_the_docs_name_is_a_flag_of_hunyuan_serve() -> None:
    known = known_flags(build_parser())
    named = named_flags()
    assert len(named) > 50  # the pages name many: the scan reads them
    assert [(where, flag) for where, flag in named if flag not in known] == []


def test_a_flag_no_command_has_is_caught() -> None:
    assert "--tls-host" in known_flags(build_parser())
    assert "--nginx-tls-host" not in known_flags(build_parser())
    assert FLAG.findall("up --nginx-tls-host api.example") == ["--nginx-tls-host"]


def test_the_tls_page_names_the_flag_of_each_front_tls_setting() -> None:
    """docs/tls.md lists the flags of the settings its example sets: each one's real name (the host's is
    --tls-host: a field of one section only has no section in its flag)."""
    from hunyuan_serve.config import NginxConfig

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flag_of = {a.dest: a.option_strings[0] for a in commands.choices["up"]._actions if a.option_strings}
    fields = [
        f"nginx.{name}"
        for name in NginxConfig.model_fields
        if name.startswith("tls_") or name == "plain_http"
    ]
    assert len(fields) >= 5
    text = (REPO / "docs" / "tls.md").read_text(encoding="utf-8")
    assert [(field, flag_of[field]) for field in fields if f"`{flag_of[field]}`" not in text] == []

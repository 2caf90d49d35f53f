"""`hunyuan-serve memory import|export|list|delete`: the deployment's memory, or a key's, in its store."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hunyuan_serve.auth.keys import key_id
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.config.flags import add_config_flags, config_from_args
from hunyuan_serve.memory import ops
from hunyuan_serve.memory.pairs import FORMATS
from hunyuan_serve.memory.tmx import MemoryFileInvalid
from hunyuan_serve.storage.backend import StoreUnavailable
from hunyuan_serve.storage.from_config import memory_from_config
from hunyuan_serve.storage.memory import SHARED, MemoryFull, MemoryStore


def _owner(args: argparse.Namespace) -> str:
    """The memory a command works on: the key's (`--key`, the key itself, as clients send it) or the
    deployment's shared one."""
    return key_id(args.key) if args.key else SHARED


async def _with_store(cfg: ServeConfig, work: Callable[[MemoryStore], Awaitable[int]]) -> int:
    store = memory_from_config(cfg)
    try:
        return await work(store)
    finally:
        await store.aclose()


def _run(args: argparse.Namespace, work: Callable[[MemoryStore], Awaitable[int]]) -> int:
    try:
        return asyncio.run(_with_store(config_from_args(args), work))
    except (MemoryFileInvalid, MemoryFull, StoreUnavailable, OSError) as err:
        print(f"hunyuan-serve memory: {err}", file=sys.stderr)
        return 1


def cmd_import(args: argparse.Namespace) -> int:
    path = Path(args.file)
    who = f"{getpass.getuser()}@{socket.gethostname()} (hunyuan-serve memory import)"

    async def work(store: MemoryStore) -> int:
        limit = config_from_args(args).replica.memory_max_units
        data = path.read_bytes()
        languages = (args.source_lang, args.target_lang)
        origin = await ops.import_file(
            store, _owner(args), path.name, who, data, args.format, languages, limit, args.keep_blank
        )
        print(f"imported {origin.units} units from {path.name} as {origin.id}")
        return 0

    return _run(args, work)


def cmd_export(args: argparse.Namespace) -> int:
    fmt = args.format or (args.out.rsplit(".", 1)[-1] if "." in args.out else "tmx")

    async def work(store: MemoryStore) -> int:
        data = await ops.export_file(store, _owner(args), fmt)
        if args.out == "-":
            sys.stdout.buffer.write(data)
        else:
            Path(args.out).write_bytes(data)
        return 0

    return _run(args, work)


def cmd_list(args: argparse.Namespace) -> int:
    async def work(store: MemoryStore) -> int:
        found = [ops.origin_json(each) for each in await store.origins(_owner(args))]
        if args.json:
            print(json.dumps({"imports": found}, ensure_ascii=False, indent=2))
            return 0
        for each in found:
            print(f"{each['id']}  {each['units']:>7} units  {each['imported']}  {each['by']}  {each['file']}")
        if not found:
            print("the memory is empty")
        return 0

    return _run(args, work)


def cmd_delete(args: argparse.Namespace) -> int:
    if not args.all and not args.id:
        print("hunyuan-serve memory delete: give an import's id (memory list), or --all", file=sys.stderr)
        return 2

    async def work(store: MemoryStore) -> int:
        removed = await store.delete(_owner(args), None if args.all else args.id)
        if removed < 0:
            print("hunyuan-serve memory delete: no such import (or the memory is empty)", file=sys.stderr)
            return 1
        print(f"deleted {removed} units")
        return 0

    return _run(args, work)


def _sub(
    subs: Any, name: str, text: str, func: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subs.add_parser(name, help=text, description=text)
    parser.add_argument("--key", help="the memory of this API key (the key itself); default: the shared one")
    add_config_flags(parser, ["top", "replica"])
    parser.set_defaults(func=func)
    return parser


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "memory",
        help="Translation memories: import TMX/CSV/TSV, export, list, delete (docs/memory.md).",
        description="The deployment's shared translation memory, or an API key's, in the store the "
        "replicas use (the run dir's store.sqlite, or Redis with replica.cache_redis_url).",
    )
    subs = parser.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    one = _sub(subs, "import", "Import a TMX 1.4b, CSV or TSV file (all of it, or nothing).", cmd_import)
    one.add_argument("file")
    one.add_argument("--format", choices=FORMATS, help="default: the file's extension")
    one.add_argument("--source-lang", help="CSV/TSV of two columns: the source language")
    one.add_argument("--target-lang", help="CSV/TSV of two columns: the target language")
    one.add_argument(
        "--keep-blank",
        action="store_true",
        help="keep units whose target is empty, as translations that leave the text out (default: "
        "left out, as not translated yet)",
    )
    out = _sub(subs, "export", "Write the memory as TMX 1.4b (or CSV/TSV).", cmd_export)
    out.add_argument("out", help="the file to write, - for standard output")
    out.add_argument("--format", choices=FORMATS, help="default: the file's extension, else tmx")
    listing = _sub(subs, "list", "The memory's imports: id, units, when, by whom, from which file.", cmd_list)
    listing.add_argument("--json", action="store_true")
    gone = _sub(subs, "delete", "Delete one import's units, or the whole memory.", cmd_delete)
    gone.add_argument("id", nargs="?", help="the import's id, as `memory list` shows it")
    gone.add_argument("--all", action="store_true", help="the whole memory")

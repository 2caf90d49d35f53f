"""The people-first question's stacks: `up`'s config of one, and one started and ready."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.ensemble import IGNORE_EOS_ENV, KV_BYTES
from bench.procs import Server, free_port, running, server_env

KEYS = {
    "page": "bench-page-key-0123456789",
    "ci-a": "bench-ci-a-key-0123456789",
    "ci-b": "bench-ci-b-key-987654321",
}


START_TRIES = 3
PORT_BUSY = "is in use"  # what `up` says of a port another process holds (run/ports.py)


@dataclass(frozen=True)
class Stack:
    """One started stack: its Nginx's base URL, its replicas' ports (each one's /metrics) and the folder
    of their logs."""

    base: str
    ports: tuple[int, ...]
    logs: Path


def stack_config(
    work: Path,
    model: Path,
    port: int,
    args: argparse.Namespace,
    width_off: bool | None = None,
    replica: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """`up`'s config of one stack in `work`; its replicas listen on base_port and the next port.
    width_off (default: --width-off) sets replica.interactive_window_s 0, the width always full;
    `replica` adds fields to the replica section."""
    keys = work / "keys"
    keys.write_text(f"{KEYS['page']}\n{KEYS['ci-a']} priority=bulk\n{KEYS['ci-b']} priority=bulk\n")
    keys.chmod(0o600)  # `up` refuses a keys file others may read
    off = args.width_off if width_off is None else width_off
    return {
        "replicas": 2,
        "base_port": free_port(),
        "run_dir": str(work / "run"),
        "engine": {
            "model": str(model),
            "dtype": "float32",
            "enforce_eager": True,
            "kv_cache_memory_bytes": KV_BYTES,
            "scheduling_policy": "priority",
            **({"max_num_seqs": args.max_num_seqs} if args.max_num_seqs else {}),
        },
        "replica": {
            "max_tokens": args.max_tokens,
            "cache_entries": 0,
            **({"interactive_window_s": 0} if off else {}),
            **(replica or {}),
        },
        "auth": {"keys_file": str(keys)},
        "nginx": {"port": port, "read_timeout_s": 300.0},
        "supervisor": {"startup_timeout_s": 600.0},
    }


def start_stack(
    started: contextlib.ExitStack,
    work: Path,
    model: Path,
    args: argparse.Namespace,
    off: bool,
    replica: Mapping[str, Any] | None = None,
) -> Stack:
    """One stack started and ready, stopped when `started` closes; what `up` said last if it fails.
    `replica` adds fields to its replica section (stack_config). A stack whose `up` found a port busy
    is started again on new ports (in work-1, work-2): free_port draws from the ephemeral range, where
    a connection of the last stack's load may still hold the port it drew."""
    for attempt in range(START_TRIES):
        tried = work if attempt == 0 else work.with_name(f"{work.name}-{attempt}")
        try:
            return _start(started, tried, model, args, off, replica)
        except RuntimeError:
            if PORT_BUSY not in (tried / "up.log").read_text(errors="replace"):
                raise
            print(f"[bench] {tried.name}: `up` found a port busy; trying new ports", flush=True)
    raise RuntimeError(f"{work.name}: `up` found a port busy in {START_TRIES} tries")


def _start(
    started: contextlib.ExitStack,
    work: Path,
    model: Path,
    args: argparse.Namespace,
    off: bool,
    replica: Mapping[str, Any] | None,
) -> Stack:
    work.mkdir()
    port = free_port()
    cfg = stack_config(work, model, port, args, width_off=off, replica=replica)
    config = work / "up.yaml"
    config.write_text(yaml.safe_dump(cfg))
    argv = [sys.executable, "-m", "hunyuan_serve", "up", "--config", str(config)]
    base = f"http://127.0.0.1:{port}"
    log = work / "up.log"
    name = f"stack, two replicas, width {'off' if off else 'on'}"
    server = started.enter_context(running(Server(name, argv, log, server_env({IGNORE_EOS_ENV: "1"}))))
    try:
        server.wait_http(f"{base}/health", args.start_timeout_s, ok=lambda d: d.get("status") == "ready")
    except (RuntimeError, TimeoutError):  # the work dir goes with this process: say what `up` said first
        print("".join(log.read_text(errors="replace").splitlines(True)[-30:]), file=sys.stderr)
        raise
    return Stack(base, (cfg["base_port"], cfg["base_port"] + 1), Path(cfg["run_dir"]) / "logs")

"""The run dirs of this user's running `up`s, recorded where `status` looks by default (the default run
dir), so that `status` can find a stack started with --run-dir and name the others it did not read."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from hunyuan_serve.config import default_run_dir
from hunyuan_serve.run.procs import pid_alive
from hunyuan_serve.run.rundir import LOCK_FILE

STACKS_DIR = "stacks"  # in the default run dir: one <pid>.json per `up` started, read by `status`


def _registry(environ: Mapping[str, str]) -> Path:
    return default_run_dir(environ) / STACKS_DIR


def register(run_dir: Path, environ: Mapping[str, str] = os.environ) -> None:
    """This `up` (its pid) recorded with its run dir; best effort: a registry that cannot be written
    only costs `status` the hint, never the start. Entries of `up`s gone are swept here and by readers."""
    registry = _registry(environ)
    entry = {"run_dir": str(run_dir.absolute()), "pid": os.getpid()}
    with contextlib.suppress(OSError):
        registry.mkdir(mode=0o700, parents=True, exist_ok=True)
        (registry / f"{os.getpid()}.json").write_text(json.dumps(entry), encoding="utf-8")
    running(environ)


def _holds_lock(run_dir: Path, pid: int) -> bool:
    """Whether `up` pid still runs with this run dir: alive, and its run dir's lock file names it (a pid
    reused by another process, or a later `up` of the same run dir, is not this entry's)."""
    try:
        named = (run_dir / LOCK_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return False
    return named == str(pid) and pid_alive(pid)


def running(environ: Mapping[str, str] = os.environ) -> list[tuple[Path, int]]:
    """(run dir, pid) of every `up` recorded that still runs, oldest pid first; the rest are swept."""
    found: list[tuple[Path, int]] = []
    for path in sorted(_registry(environ).glob("*.json")):
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            run_dir, pid = Path(entry["run_dir"]), int(entry["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            run_dir, pid = Path(), 0
        if pid and _holds_lock(run_dir, pid):
            found.append((run_dir, pid))
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return sorted(found, key=lambda item: item[1])

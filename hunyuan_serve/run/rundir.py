"""The run directory and the host facts every program that renders Nginx needs (up, gateway, k8s)."""

from __future__ import annotations

import fcntl
import os
import pwd
from pathlib import Path
from typing import IO

from hunyuan_serve.config import ConfigError, ServeConfig, default_run_dir

LOCK_FILE = "up.lock"  # held (flock) by the program running in the run dir, and naming its pid


def run_dir_of(cfg: ServeConfig) -> Path:
    return Path(cfg.run_dir) if cfg.run_dir else default_run_dir(os.environ)


def web_root() -> Path:
    return Path(__file__).resolve().parent.parent / "web"


def worker_user() -> str | None:
    """Nginx started by root would run workers as nobody, who cannot read a private run dir."""
    return pwd.getpwuid(os.geteuid()).pw_name if os.geteuid() == 0 else None


def make_run_dir(run_dir: Path) -> None:
    """The run dir and its logs/, writable by this user, or a ConfigError naming the path (a container's
    read-only root without a volume there, a volume owned by another uid)."""
    try:
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        writable = os.access(run_dir, os.W_OK) and os.access(run_dir / "logs", os.W_OK)
        reason = "" if writable else f"not writable by uid {os.getuid()}"
    except OSError as err:
        reason = err.strerror or str(err)
    if reason:
        raise ConfigError(
            f"run dir {run_dir} must be writable ({reason}): mount a volume there, or pass --run-dir"
        )


def lock_run_dir(run_dir: Path) -> IO[str]:
    path = run_dir / LOCK_FILE
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the life of `up`
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        other = handle.read().strip() or "?"
        handle.close()
        raise ConfigError(f"another `up` (pid {other}) is running with run dir {run_dir}") from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle

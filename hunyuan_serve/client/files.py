"""The client's output files: written whole by a rename, in the mode the replaced file had or the umask's."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

_TRIES = 100  # names drawn for the temporary file before giving up (a clash is 1 in 2**32 a draw)


def write_atomic(path: Path, data: bytes) -> None:
    """data at path, written beside it and renamed over it: no reader and no interruption sees half a file.

    A file that is replaced keeps its mode; a new one gets 0666 less the umask, as open() would give it
    (tempfile.mkstemp makes its files 0600, which made every output private).
    """
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _create_beside(path: Path) -> tuple[int, Path]:
    """A new hidden file beside path, opened for writing with mode 0666 (the kernel applies the umask)."""
    for _ in range(_TRIES):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path} after {_TRIES} tries")

"""Size-bounded logs: a file past logs.rotate_at_bytes moves to .1 (older ones shift, the last drops)."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hunyuan_serve.config import LogsConfig

Emit = Callable[..., None]


@dataclass(frozen=True)
class LogFile:
    """A log and how its writer moves on to a new file after a rotation.

    reopen: called once the file was renamed, to make its writer open the path again (Nginx: USR1).
    None: the writer holds the file open in append mode and cannot be told (a replica's stdout), so the
    file is copied and truncated in place; its next write lands at the start of the emptied file.
    """

    path: Path
    reopen: Callable[[], None] | None = None


def rotated_names(path: Path, keep: int) -> list[Path]:
    """Where older contents go: path.1 (the newest) to path.<keep>."""
    return [path.with_name(f"{path.name}.{i}") for i in range(1, keep + 1)]


def due(files: Sequence[LogFile], sizes: Mapping[Path, int], limit: int) -> list[LogFile]:
    """The files to rotate now: those at or past the limit (0: never)."""
    if limit <= 0:
        return []
    return [f for f in files if sizes.get(f.path, 0) >= limit]


def rotate(file: LogFile, keep: int) -> int:
    """Shift the older copies, move the file's contents to .1; returns the bytes moved."""
    older = rotated_names(file.path, keep)
    for newer, next_older in reversed(list(itertools.pairwise(older))):  # .keep is overwritten: dropped
        with contextlib.suppress(FileNotFoundError):
            os.replace(newer, next_older)
    if file.reopen is not None:
        size = file.path.stat().st_size
        os.replace(file.path, older[0])  # its writer keeps appending to .1 until it reopens the path
        file.reopen()
        return size
    with open(file.path, "rb") as source, open(older[0], "wb") as copy:
        shutil.copyfileobj(source, copy)
        # A line written after the last read and before the truncate is lost: one syscall's window.
        os.truncate(file.path, 0)
        return copy.tell()


def sizes_of(files: Sequence[LogFile]) -> dict[Path, int]:
    """Each file's size now; a missing file is left out."""
    sizes: dict[Path, int] = {}
    for f in files:
        with contextlib.suppress(FileNotFoundError):
            sizes[f.path] = f.path.stat().st_size
    return sizes


def rotate_due(files: Sequence[LogFile], cfg: LogsConfig, emit: Emit) -> None:
    """One check: rotate what is due, each as an event; a failure is an event too, never fatal."""
    for file in due(files, sizes_of(files), cfg.rotate_at_bytes):
        try:
            moved = rotate(file, cfg.rotate_keep)
        except OSError as err:
            emit("log_rotate_failed", path=str(file.path), error=f"{type(err).__name__}: {err}")
            continue
        emit("log_rotated", path=str(file.path), bytes=moved, kept=cfg.rotate_keep)


async def rotate_forever(
    files: Callable[[], Sequence[LogFile]],
    settings: Callable[[], LogsConfig],
    sleep: Callable[[float], Awaitable[None]],
    emit: Emit,
) -> None:
    """Check every logs.rotate_check_interval_s until cancelled; settings are read each time (a
    reload may change them)."""
    while True:
        cfg = settings()
        await sleep(cfg.rotate_check_interval_s)
        rotate_due(files(), settings(), emit)


def files_in(folder: Path) -> list[LogFile]:
    """The *.log files of a folder, whose writers hold them open in append mode (copied and truncated)."""
    return [LogFile(p) for p in sorted(folder.glob("*.log")) if p.is_file()]

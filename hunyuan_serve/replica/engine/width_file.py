"""The bulk width shared with vLLM's engine core process, and its scheduler's acknowledgements: a small
memory-mapped file."""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

# The replica's half: the width, then the tokens of new bulk prompts a step without a person may take.
_FORMAT = "<ii"
# The scheduler's half, after it: the engine core's pid once the pausing scheduler is built (0: not
# built), then its schedule() calls so far and the width the latest one read. Two writers, one half
# each: neither overwrites the other's bytes.
_ACK_FORMAT = "<qqq"
_ACK_AT = struct.calcsize(_FORMAT)
SIZE = _ACK_AT + struct.calcsize(_ACK_FORMAT)
# While nothing is written, or in a file of another shape: bulk beside people is not limited; as the
# prompt tokens: any.
UNLIMITED = -1
# Memory-backed where the host has it, so a write per width change touches no disk.
_SHM = Path("/dev/shm")
_PREFIX = "hunyuan-bulk-width-"


@dataclass(frozen=True)
class Ack:
    """What the scheduler wrote back: its process (0: no pausing scheduler was built), the steps it
    scheduled, and the width it read at the latest."""

    scheduler_pid: int = 0
    steps: int = 0
    width: int = UNLIMITED


class WidthWriter:
    """The replica's end: creates the file (its path goes into the engine's config) and writes the
    width and the prompt tokens."""

    def __init__(self, directory: Path | None = None) -> None:
        shm = _SHM.is_dir() and os.access(_SHM, os.W_OK)
        where = directory or (_SHM if shm else Path(tempfile.gettempdir()))
        owner = _owner()
        _remove_orphans(where, owner)
        fd, name = tempfile.mkstemp(prefix=f"{_PREFIX}{owner}{os.getpid()}-", dir=where)
        self.path = Path(name)
        self.limits = (UNLIMITED, UNLIMITED)
        os.write(fd, struct.pack(_FORMAT, *self.limits) + struct.pack(_ACK_FORMAT, 0, 0, UNLIMITED))
        self._map = mmap.mmap(fd, SIZE)
        os.close(fd)

    def write(self, width: int, prompt_tokens: int | None = None) -> None:
        """Both in one slice assignment; a step that reads them mid-write is one step off, and the
        next reads both."""
        limits = (width, UNLIMITED if prompt_tokens is None else prompt_tokens)
        if limits != self.limits:
            self._map[:_ACK_AT] = struct.pack(_FORMAT, *limits)
            self.limits = limits

    def acknowledged(self) -> Ack:
        """The scheduler's half as it stands (Ack() once closed)."""
        try:
            return Ack(*struct.unpack(_ACK_FORMAT, self._map[_ACK_AT:SIZE]))
        except ValueError:  # closed
            return Ack()

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            self._map.close()
        self.path.unlink(missing_ok=True)


class WidthReader:
    """The engine core's end: reads the width and prompt tokens the replica wrote last (UNLIMITED for
    both when the file is gone), and writes its acknowledgements back."""

    def __init__(self, path: str | Path) -> None:
        self._map: mmap.mmap | None = None
        self.steps = 0
        with contextlib.suppress(OSError, ValueError), open(path, "r+b") as file:
            self._map = mmap.mmap(file.fileno(), SIZE)

    def read(self) -> tuple[int, int]:
        if self._map is None:
            return UNLIMITED, UNLIMITED
        width, prompt_tokens = struct.unpack(_FORMAT, self._map[:_ACK_AT])
        return int(width), int(prompt_tokens)

    def built(self) -> None:
        """The pausing scheduler exists, in this process: the replica's start waits to see it."""
        self._ack(self.steps, UNLIMITED)

    def acknowledge(self, width: int) -> None:
        """One step scheduled, with `width` read for it: the replica's proof the hook is live, and a
        step count of our own for its stall watch."""
        self.steps += 1
        self._ack(self.steps, width)

    def _ack(self, steps: int, width: int) -> None:
        if self._map is not None:
            with contextlib.suppress(ValueError):
                self._map[_ACK_AT:SIZE] = struct.pack(_ACK_FORMAT, os.getpid(), steps, width)


def _owner() -> str:
    """The pid namespace this process's pids belong to, as a name's part ("" where /proc cannot say).
    A /dev/shm shared between containers (--ipc=host, or podman kube play's memory emptyDir) holds
    files whose pids mean nothing here; a file removed before its engine core opened it would leave
    that replica's bulk unlimited."""
    try:
        return f"ns{os.stat('/proc/self/ns/pid').st_ino}-"
    except OSError:
        return ""


def _remove_orphans(directory: Path, owner: str) -> None:
    """Width files of this pid namespace whose replica process is gone: a replica killed with -9
    cannot remove its own, and /dev/shm holds them until the host restarts."""
    if not owner:
        return
    for path in directory.glob(f"{_PREFIX}{owner}*-*"):
        pid = path.name.removeprefix(_PREFIX + owner).split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                path.unlink()


def _alive(pid: int) -> bool:
    """Whether the process exists (an unreaped one counts). Not run/procs.py's pid_alive: the house's
    import rules keep the replica off run/, the supervisor's side."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True

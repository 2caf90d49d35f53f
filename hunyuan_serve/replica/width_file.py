"""The bulk width shared with vLLM's engine core process: one integer in a small memory-mapped file."""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import tempfile
from pathlib import Path

_FORMAT = "<i"
SIZE = struct.calcsize(_FORMAT)
# While no width is written, or in a file of another shape: bulk beside people is not limited.
UNLIMITED = -1
# Memory-backed where the host has it, so a write per width change touches no disk.
_SHM = Path("/dev/shm")


class WidthWriter:
    """The replica's end: creates the file (its path goes into the engine's config) and writes the width."""

    def __init__(self, directory: Path | None = None) -> None:
        where = directory or (_SHM if _SHM.is_dir() and os.access(_SHM, os.W_OK) else None)
        fd, name = tempfile.mkstemp(prefix="hunyuan-bulk-width-", dir=where)
        self.path = Path(name)
        os.write(fd, struct.pack(_FORMAT, UNLIMITED))
        self._map = mmap.mmap(fd, SIZE)
        os.close(fd)
        self.width = UNLIMITED

    def write(self, width: int) -> None:
        if width != self.width:
            self._map[:SIZE] = struct.pack(_FORMAT, width)
            self.width = width

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            self._map.close()
        self.path.unlink(missing_ok=True)


class WidthReader:
    """The engine core's end: reads the width the replica wrote last (UNLIMITED when the file is gone)."""

    def __init__(self, path: str | Path) -> None:
        self._map: mmap.mmap | None = None
        with contextlib.suppress(OSError, ValueError), open(path, "rb") as file:
            self._map = mmap.mmap(file.fileno(), SIZE, access=mmap.ACCESS_READ)

    def read(self) -> int:
        if self._map is None:
            return UNLIMITED
        return int(struct.unpack(_FORMAT, self._map[:SIZE])[0])

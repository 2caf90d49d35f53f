"""The pinned vLLM wheel's source files, read from PyPI by byte ranges (never the whole wheel) and cached.

deploy/install.sh fetches them (`python -m tests.support.vllm_wheel`), so the suite reads the cache only.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tomllib
import urllib.request
import zipfile
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIMPLE = "https://pypi.org/simple/vllm/"
# The linux x86_64 wheel: the one a GPU host of this project installs (pyproject's gpu extra).
_WHEEL = re.compile(r"vllm-(?P<version>[^-]+)-cp\d+-abi3-manylinux_[0-9_]+_x86_64\.whl")
CHUNK = 256 * 1024  # bytes per range request: a zip member of vLLM's is rarely larger
TIMEOUT_S = 30.0


def pinned_version() -> str:
    """The version the gpu extra pins (vllm==X)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins = [spec.split("==", 1)[1] for spec in extras["gpu"] if spec.startswith("vllm==")]
    assert pins, "pyproject.toml's gpu extra pins no vllm==X"
    return pins[0]


def cache_dir(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """$XDG_CACHE_HOME/hunyuan-serve/vllm-source (or ~/.cache/...), beside the demo model's cache."""
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hunyuan-serve" / "vllm-source"


class _Ranges(io.RawIOBase):
    """A remote file read by HTTP Range requests, in chunks, for zipfile."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos = url, size, 0
        self.chunks: dict[int, bytes] = {}
        self.requests = 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = [offset, self.pos + offset, self.size + offset][whence]
        return self.pos

    def tell(self) -> int:
        return self.pos

    def _chunk(self, index: int) -> bytes:
        if index not in self.chunks:
            start = index * CHUNK
            end = min(self.size, start + CHUNK) - 1
            request = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end}"})
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                self.chunks[index] = response.read()
            self.requests += 1
        return self.chunks[index]

    def read(self, size: int = -1) -> bytes:
        end = self.size if size < 0 else min(self.size, self.pos + size)
        out = bytearray()
        while self.pos < end:
            chunk = self._chunk(self.pos // CHUNK)
            offset = self.pos % CHUNK
            piece = chunk[offset : offset + end - self.pos]
            out += piece
            self.pos += len(piece)
        return bytes(out)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _wheel_url(version: str) -> tuple[str, int]:
    request = urllib.request.Request(SIMPLE, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        files = json.load(response)["files"]
    for file in files:
        found = _WHEEL.fullmatch(file["filename"])
        if found and found["version"] == version:
            return file["url"], int(file["size"])
    raise LookupError(f"PyPI lists no linux x86_64 wheel of vllm {version}")


def fetch(version: str, paths: Iterable[str]) -> dict[str, str | None]:
    """Each path's text in the wheel (None where the wheel has no such file), by byte ranges."""
    url, size = _wheel_url(version)
    with zipfile.ZipFile(_Ranges(url, size)) as wheel:
        names = set(wheel.namelist())
        return {p: wheel.read(p).decode("utf-8") if p in names else None for p in sorted(set(paths))}


FETCH = "deploy/install.sh, or `.venv/bin/python -m tests.support.vllm_wheel` (about 1 MB from PyPI)"


class NotCached(LookupError):
    """The cache lacks the pinned vLLM's files, or some of them; the message says what to run."""


def cached_file(version: str) -> Path:
    return cache_dir() / f"vllm-{version}.json"


def cached(version: str, paths: Iterable[str]) -> dict[str, str | None]:
    """The files from the cache, never the network (deploy/install.sh filled it)."""
    wanted = sorted(set(paths))
    file = cached_file(version)
    if not file.is_file():
        raise NotCached(f"no copy of vllm {version}'s source files in {file}: fetch them with {FETCH}")
    held = json.loads(file.read_text())
    missing = [p for p in wanted if p not in held]
    if missing:
        raise NotCached(f"{file} lacks {', '.join(missing)}: fetch them again with {FETCH}")
    return {p: held[p] for p in wanted}


def sources(version: str, paths: Iterable[str]) -> dict[str, str | None]:
    """The files, from the cache when it holds every one of them, else fetched and cached."""
    wanted = sorted(set(paths))
    with contextlib.suppress(NotCached):
        return cached(version, wanted)
    texts = fetch(version, wanted)
    file = cached_file(version)
    file.parent.mkdir(parents=True, exist_ok=True)
    partial = file.with_suffix(".part")
    partial.write_text(json.dumps(texts))
    partial.replace(file)
    return texts


def main() -> None:
    """Fetch (or find cached) the gpu pin's files of every vLLM internal this project relies on."""
    from hunyuan_serve.replica.engine.internals import INTERNALS

    version = pinned_version()
    texts = sources(version, {internal.path for internal in INTERNALS})
    print(f"vllm {version}: {len(texts)} source files in {cached_file(version)}")


if __name__ == "__main__":
    main()

"""Structured JSON events, one line each, to the run directory's events file and to stderr."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import IO, Any


class JsonEvents:
    """Call with an event name and fields; `ts` is wall-clock seconds so other processes can compare."""

    def __init__(self, path: Path, echo: IO[str] | None = sys.stderr) -> None:
        self.path = path
        self._file = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives as long as `up`
        self._echo = echo

    def __call__(self, event: str, **fields: Any) -> None:
        line = json.dumps({"ts": round(time.time(), 4), "event": event, **fields}, default=str)
        self._file.write(line + "\n")
        if self._echo is not None:
            print(line, file=self._echo, flush=True)

    def close(self) -> None:
        self._file.close()


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event written so far (a torn last line is skipped)."""
    events: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return events
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events

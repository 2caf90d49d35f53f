"""The stack's edge as its own Nginx sees it: the cap per replica it enforces, its time per refusal."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# $upstream_addr of a request Nginx answered itself because no replica could take it: the upstream
# group's name (edge/templates/nginx.conf.j2) in place of a replica's address.
EDGE_UPSTREAM = "hs_replicas"
_MAX_CONNS = re.compile(r"^\s*server \S+ .*\bmax_conns=(\d+)", re.MULTILINE)


def edge_cap(conf: Path) -> int:
    """The largest max_conns of the upstream servers in a rendered nginx.conf; 0: no cap."""
    return max((int(cap) for cap in _MAX_CONNS.findall(conf.read_text(encoding="utf-8"))), default=0)


def log_size(path: Path) -> int:
    """Where the next line of a log will start (0 before it exists)."""
    return path.stat().st_size if path.is_file() else 0


def edge_refusals_ms(access_log: Path, offset: int = 0) -> list[float]:
    """request_time (ms) of each 503 Nginx answered itself, in the JSON access log from byte `offset`
    on: from its reading the request's first byte to the client's closing the connection, since with
    keepalive off Nginx waits for that close (lingering close) before it logs."""
    times = []
    with access_log.open("rb") as handle:
        handle.seek(offset)
        for raw in handle:
            entry = _entry(raw)
            if entry and entry.get("status") == 503 and entry.get("upstream_addr") == EDGE_UPSTREAM:
                times.append(float(entry["request_time"]) * 1000.0)
    return times


def _entry(raw: bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(raw)
    except ValueError:  # a line cut by the log's rotation or a write in progress
        return None
    return entry if isinstance(entry, dict) else None

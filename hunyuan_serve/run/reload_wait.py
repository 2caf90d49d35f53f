"""A reload followed to its outcome: a program's events file read from a SIGHUP until it says how it ended."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hunyuan_serve.run.events import read_events
from hunyuan_serve.run.procs import pid_alive

RELOAD_POLL_S = 0.2  # how often the events file is read while the reload goes on (a pause, not a deadline)

Events = Sequence[Mapping[str, Any]]
# How a reload ends in the events of `up` and of the gateway alike: each carries the reload's number.
OUTCOMES = ("reload_done", "reload_failed", "reload_refused")


def reload_id(events: Events) -> int | None:
    """The reload that will serve a SIGHUP sent before these events: the first one requested in them."""
    return next((int(e["reload"]) for e in events if e.get("event") == "reload_requested"), None)


def reload_end(events: Events, rid: int) -> Mapping[str, Any] | None:
    """The event that ended reload `rid`, None while it goes on."""
    return next((e for e in events if e.get("event") in OUTCOMES and e.get("reload") == rid), None)


def follow_reload(
    events_path: Path,
    mark: int,
    pid: int,
    timeout_s: float,
    *,
    outcome: Callable[[Events, int], tuple[int, str] | None],
    who: str,
    now: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """The exit code of the reload that `pid` (`who`, for the messages) logs after line `mark` of its
    events: what `outcome` says of it, or 1 when the program exits or timeout_s passes first; now/sleep
    are the clock (a fake one in tests)."""
    deadline = now() + timeout_s
    rid: int | None = None
    while now() < deadline:
        events = read_events(events_path)[mark:]
        rid = rid or reload_id(events)
        ended = outcome(events, rid) if rid is not None else None
        if ended is not None:
            print(ended[1], file=sys.stdout if ended[0] == 0 else sys.stderr)
            return ended[0]
        if not pid_alive(pid):
            print(f"hunyuan-serve: {who} (pid {pid}) exited before the reload ended", file=sys.stderr)
            return 1
        sleep(RELOAD_POLL_S)
    print(
        f"hunyuan-serve: {who}'s reload {rid or '?'} has not ended within {timeout_s:g}s; it goes on "
        "(its status shows it)",
        file=sys.stderr,
    )
    return 1

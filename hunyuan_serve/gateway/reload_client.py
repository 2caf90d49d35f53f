"""`hunyuan-serve gateway reload`: SIGHUP to the running gateway, its events followed to the outcome."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hunyuan_serve.gateway.loop import EVENTS_FILE, STATE_FILE
from hunyuan_serve.run.events import read_events
from hunyuan_serve.run.procs import pid_alive

RELOAD_POLL_S = 0.2  # how often `gateway reload` reads the events file while it waits (a pause)
OUTCOMES = ("reload_done", "reload_refused", "reload_failed")


def reload_gateway(run_dir: Path, timeout_s: float) -> int:
    """SIGHUP to the gateway of run_dir, then wait for its reload's outcome; the exit code."""
    try:
        state = json.loads((run_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = None
    pid = int(state.get("pid", 0)) if isinstance(state, dict) else 0
    if not pid or not state.get("running") or not pid_alive(pid):
        print(
            f"hunyuan-serve: no gateway is running with run dir {run_dir} (pass --run-dir)", file=sys.stderr
        )
        return 1
    events = run_dir / EVENTS_FILE
    mark = len(read_events(events))
    os.kill(pid, signal.SIGHUP)  # the gateway reads its front's pair again; the events say what came of it
    return await_reload(events, mark, pid, timeout_s)


def await_reload(
    events_path: Path,
    mark: int,
    pid: int,
    timeout_s: float,
    now: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Follow the events until the reload's outcome; now/sleep are the clock (a fake one in tests)."""
    deadline = now() + timeout_s
    rid: int | None = None
    while now() < deadline:
        events = read_events(events_path)[mark:]
        rid = rid or next((int(e["reload"]) for e in events if e.get("event") == "reload_requested"), None)
        ended = reload_outcome(events, rid) if rid is not None else None
        if ended is not None:
            print(ended[1], file=sys.stdout if ended[0] == 0 else sys.stderr)
            return ended[0]
        if not pid_alive(pid):
            print(f"hunyuan-serve: the gateway (pid {pid}) exited before the reload ended", file=sys.stderr)
            return 1
        sleep(RELOAD_POLL_S)
    print(f"hunyuan-serve: gateway reload {rid or '?'} has not ended within {timeout_s:g}s", file=sys.stderr)
    return 1


def reload_outcome(events: Sequence[Mapping[str, Any]], rid: int) -> tuple[int, str] | None:
    """(exit code, what to print) once reload `rid` has ended in these events; None while it goes on."""
    end = next((e for e in events if e.get("event") in OUTCOMES and e.get("reload") == rid), None)
    if end is None:
        return None
    if end["event"] == "reload_done":
        tls = end.get("tls")
        served = f"the front serves {tls}" if tls else "TLS is off (no nginx.tls_cert)"
        return 0, f"gateway reload {rid} done: Nginx reloaded; {served}"
    if end["event"] == "reload_refused":
        return 1, f"gateway reload {rid} refused, the front keeps the pair it serves: {end.get('error')}"
    return 1, f"gateway reload {rid} failed: Nginx refused the new config: {end.get('error')}"

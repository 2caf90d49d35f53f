"""`hunyuan-serve gateway reload`: SIGHUP to the running gateway, its events followed to the outcome."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hunyuan_serve.gateway.loop import EVENTS_FILE, STATE_FILE
from hunyuan_serve.run.events import read_events
from hunyuan_serve.run.procs import pid_alive
from hunyuan_serve.run.reload_wait import follow_reload, reload_end


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
    return follow_reload(events, mark, pid, timeout_s, outcome=reload_outcome, who="the gateway")


def reload_outcome(events: Sequence[Mapping[str, Any]], rid: int) -> tuple[int, str] | None:
    """(exit code, what to print) once reload `rid` has ended in these events; None while it goes on."""
    end = reload_end(events, rid)
    if end is None:
        return None
    if end["event"] == "reload_done":
        tls = end.get("tls")
        served = f"the front serves {tls}" if tls else "TLS is off (no nginx.tls_cert)"
        return 0, f"gateway reload {rid} done: Nginx reloaded; {served}"
    if end["event"] == "reload_refused":
        code = int(end.get("exit_code", 1))  # 2: a secret file others may read, as at every command
        return code, f"gateway reload {rid} refused, the front keeps the pair it serves: {end.get('error')}"
    return 1, f"gateway reload {rid} failed: Nginx refused the new config: {end.get('error')}"

"""`hunyuan-serve reload`: SIGHUP to the running `up`, then its events followed to the reload's outcome."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from hunyuan_serve.config import ConfigError, build_config, default_run_dir, load_config_file
from hunyuan_serve.run.rundir import run_dir_of

SOURCE_FILE = "reload-source.json"  # in the run dir: the config file and flags `up` was started with


def _reload_target(args: argparse.Namespace) -> tuple[Path, float]:
    """The run dir of the `up` to reload, and how long to wait for the outcome."""
    if args.config:
        cfg = build_config(load_config_file(args.config), {})
        run_dir = Path(args.run_dir) if args.run_dir else run_dir_of(cfg)
        recorded = _recorded_config(run_dir)
        if recorded is not None and recorded != str(Path(args.config).resolve()):
            raise ConfigError(f"the `up` in {run_dir} was started with {recorded}: that is the file it reads")
    else:
        run_dir = Path(args.run_dir) if args.run_dir else default_run_dir(os.environ)
        try:  # the running `up`'s own effective config
            cfg = build_config(load_config_file(run_dir / "config.yaml"), {})
        except ConfigError:
            cfg = build_config({}, {})
    return run_dir, args.timeout or cfg.supervisor.reload_wait_timeout_s


def _recorded_config(run_dir: Path) -> str | None:
    try:
        data = json.loads((run_dir / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("config") if isinstance(data, dict) else None


def cmd_reload(args: argparse.Namespace) -> int:
    import signal

    from hunyuan_serve.run.events import read_events
    from hunyuan_serve.run.procs import pid_alive
    from hunyuan_serve.run.state import EVENTS_FILE, read_state

    run_dir, timeout_s = _reload_target(args)
    state = read_state(run_dir)
    pid = int(state.get("pid", 0)) if state else 0
    if not state or not state.get("running") or not pid_alive(pid):
        print(f"hunyuan-serve: no `up` is running with run dir {run_dir} (pass --run-dir)", file=sys.stderr)
        return 1
    events = Path(state.get("events") or run_dir / EVENTS_FILE)
    mark = len(read_events(events))
    os.kill(pid, signal.SIGHUP)  # `up` reads its config again; the events say what became of it
    return _await_reload(events, mark, pid, timeout_s)


def _await_reload(
    events_path: Path,
    mark: int,
    pid: int,
    timeout_s: float,
    now: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Follow the events until reload's outcome; now/sleep are the clock (a fake one in tests)."""
    from hunyuan_serve.run.reload_wait import follow_reload
    from hunyuan_serve.supervise.reload import outcome

    return follow_reload(
        events_path,
        mark,
        pid,
        timeout_s,
        outcome=outcome,
        who="`up`",
        now=now,
        sleep=sleep,
    )

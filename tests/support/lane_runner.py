"""`make test`'s pytest: N lanes (tests/support/lanes.py) as sessions side by side, each line prefixed.

    python -m tests.support.lane_runner [--lanes N] [PYTEST ARGS...]

Exits 0 when every lane passed (a lane left with nothing selected counts as passed when another ran
tests), else the first failing lane's status. SIGINT and SIGTERM reach every lane as SIGINT once, so
each one's fixtures stop what they started.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

NO_TESTS_COLLECTED = 5  # pytest.ExitCode.NO_TESTS_COLLECTED
DEFAULT_LANES = 2  # the cores of the machines this suite is sized for


def combined_status(statuses: Sequence[int]) -> int:
    """The run's exit status from the lanes': a failure wins, then 'no tests' only if no lane ran."""
    failed = [code for code in statuses if code not in (0, NO_TESTS_COLLECTED)]
    if failed:
        return failed[0]
    return 0 if 0 in statuses else NO_TESTS_COLLECTED


def lane_argv(index: int, count: int, pytest_args: Sequence[str]) -> list[str]:
    """One lane's pytest, with a cache directory of its own (two sessions would write one lastfailed)."""
    cache = f"cache_dir=.pytest_cache/lane-{index}"
    return [sys.executable, "-m", "pytest", f"--lane={index}/{count}", "-o", cache, *pytest_args]


def _relay(stream: IO[bytes], prefix: bytes, lock: threading.Lock) -> None:
    for line in iter(stream.readline, b""):
        with lock:
            sys.stdout.buffer.write(prefix + line)
            sys.stdout.buffer.flush()


def lane_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The lanes' environment: unbuffered, and writing bytecode even where the caller's shell says not to.

    With PYTHONDONTWRITEBYTECODE set, nothing of this checkout is ever cached as bytecode: every lane
    rewrites every test module's asserts again, and every replica, `up` and CLI process the tests start
    compiles hunyuan_serve anew (importing the replica's app: 1.5 s of CPU against 0.8 s from the cache,
    on the suite's 2-core machine). The caches go to __pycache__/, which git ignores.
    """
    env = {key: value for key, value in environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONUNBUFFERED": "1"}


def _start(count: int, pytest_args: Sequence[str]) -> list[subprocess.Popen[bytes]]:
    # Sessions of their own: a terminal's Ctrl-C must not reach them twice (once here, once forwarded).
    env = lane_env(os.environ)
    return [
        subprocess.Popen(
            lane_argv(index, count, pytest_args),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        for index in range(count)
    ]


def run(count: int, pytest_args: Sequence[str]) -> int:
    started = time.monotonic()
    lanes = _start(count, pytest_args)
    lock = threading.Lock()

    def interrupt(signum: int, frame: object) -> None:
        for lane in lanes:
            if lane.poll() is None:
                lane.send_signal(signal.SIGINT)

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    relays = [
        threading.Thread(target=_relay, args=(lane.stdout, f"[lane {i}] ".encode(), lock), daemon=True)
        for i, lane in enumerate(lanes)
    ]
    for relay in relays:
        relay.start()
    statuses = [lane.wait() for lane in lanes]
    for relay in relays:
        relay.join()
    status = combined_status(statuses)
    print(f"lanes: exit statuses {statuses}, {time.monotonic() - started:.0f} s in all -> {status}")
    return status


def main(argv: Sequence[str] | None = None) -> int:
    # No abbreviations: pytest's own --lane=I/N must not read as --lanes.
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--lanes", type=int, default=DEFAULT_LANES, help="pytest sessions side by side")
    args, pytest_args = parser.parse_known_args(argv)
    if args.lanes < 1:
        parser.error("--lanes must be at least 1")
    return run(args.lanes, pytest_args)


if __name__ == "__main__":
    sys.exit(main())

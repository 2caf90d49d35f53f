"""The shared start/stop helper on small real processes: it stops them, and fails when one is left."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.support.stacks import alive, started, stop

# Exits 0 on SIGTERM, like `up` and the replica.
POLITE = (
    "import signal,sys,time;signal.signal(signal.SIGTERM,lambda *a:sys.exit(0));"
    "print('up',flush=True);time.sleep(60)"
)
# Starts a grandchild in a session of its own (as `up` starts replicas), prints its pid, exits on SIGTERM.
LEAKY = (
    "import signal,subprocess,sys,time;"
    "c=subprocess.Popen([sys.executable,'-c','import time;time.sleep(60)'],start_new_session=True);"
    "print(c.pid,flush=True);signal.signal(signal.SIGTERM,lambda *a:sys.exit(0));time.sleep(60)"
)
STUBBORN = (
    "import signal,time;signal.signal(signal.SIGTERM,signal.SIG_IGN);print('up',flush=True);time.sleep(60)"
)


def _printed(log: Path) -> bool:
    return log.exists() and log.read_text().strip() != ""


def test_a_process_that_exits_on_sigterm_stops_with_its_code(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with started([sys.executable, "-c", POLITE], log=log, ready=lambda: _printed(log), timeout_s=30) as proc:
        assert proc.poll() is None
        assert stop(proc) == 0
    assert not alive(proc.pid)


def test_a_process_left_behind_fails_the_stop_and_is_killed(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with started([sys.executable, "-c", LEAKY], log=log, ready=lambda: _printed(log), timeout_s=30) as proc:
        grandchild = int(log.read_text().split()[0])
        assert alive(grandchild)
        with pytest.raises(AssertionError, match=f"exited 0 leaving \\['{grandchild} "):
            stop(proc, reap_timeout_s=1)
    deadline = time.monotonic() + 10
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_a_process_that_ignores_sigterm_fails_the_stop_and_is_killed(tmp_path: Path) -> None:
    log = tmp_path / "log"
    ready = lambda: _printed(log)  # noqa: E731
    with started([sys.executable, "-c", STUBBORN], log=log, ready=ready, timeout_s=30) as proc:
        with pytest.raises(AssertionError, match="did not exit within 1s of SIGTERM"):
            stop(proc, timeout_s=1)
        assert proc.returncode == -9


def test_a_process_that_exits_before_ready_fails_with_its_output(tmp_path: Path) -> None:
    code = "print('no such model', flush=True); raise SystemExit(3)"
    with (
        pytest.raises(pytest.fail.Exception, match="exited with 3 before ready:\nno such model"),
        started([sys.executable, "-c", code], log=tmp_path / "log", ready=lambda: False, timeout_s=30),
    ):
        pass

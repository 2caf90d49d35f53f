"""Free loopback ports, and real processes (`up`, a replica) started with a bound and always stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from hunyuan_serve.run.ports import free_ports
from hunyuan_serve.run.state import read_state

STOP_TIMEOUT_S = 60.0  # `up` drains Nginx, then gives each replica its own kill timeout
REAP_TIMEOUT_S = 10.0  # after the leader exits, how long its processes may take to be gone
POLL_S = 0.1


def free_port() -> int:
    """One loopback port that nothing holds now, below the ephemeral range (run/ports.py)."""
    return free_ports(1)[0]


def cli(*args: str) -> list[str]:
    """The argv of `hunyuan-serve ARGS` run by this interpreter."""
    return [sys.executable, "-m", "hunyuan_serve", *args]


TINY_KV_CACHE_BYTES = 128 * 1024 * 1024


def tiny_engine(model: Path, max_num_seqs: int = 16) -> dict[str, object]:
    """The engine section of an `up` config on a tiny checkpoint, sized for two shared cores."""
    return {
        "model": str(model),
        "dtype": "float32",
        "enforce_eager": True,
        "kv_cache_memory_bytes": TINY_KV_CACHE_BYTES,
        "max_model_len": 512,
        "max_num_seqs": max_num_seqs,
    }


def tiny_up(model: Path, run_dir: Path, port: int, base_port: int, max_tokens: int) -> list[str]:
    """`hunyuan-serve up` with one replica on a tiny checkpoint, the flags of tiny_engine's settings."""
    cmd = cli("up", "--model", str(model), "--replicas", "1", "--port", str(port))
    cmd += ["--base-port", str(base_port), "--run-dir", str(run_dir)]
    cmd += ["--dtype", "float32", "--enforce-eager", "true", "--max-model-len", "512"]
    cmd += ["--kv-cache-memory-bytes", str(TINY_KV_CACHE_BYTES), "--max-num-seqs", "16"]
    return [*cmd, "--max-tokens", str(max_tokens)]


def http_ok(url: str) -> Callable[[], bool]:
    """A readiness condition: GET url answers 200 (not listening yet counts as not ready)."""

    def ready() -> bool:
        try:
            return httpx.get(url, timeout=5, trust_env=False).status_code == 200
        except httpx.TransportError:
            return False

    return ready


def replicas_ready(url: str, count: int) -> Callable[[], bool]:
    """A readiness condition: /health answers and Nginx's routing lists count replicas, all ready."""
    health = http_ok(url + "/health")

    def ready() -> bool:
        if not health():
            return False
        listing = httpx.get(url + "/_hs/replicas", trust_env=False, timeout=5).json()
        replicas = listing.get("replicas", [])
        return len(replicas) == count and all(r["ready"] for r in replicas)

    return ready


def tail(log: Path, chars: int = 3000) -> str:
    try:
        return log.read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def all_routed(run_dir: Path) -> bool:
    """`up`'s state file: every replica it lists ready, and Nginx routing to each of them."""
    state = read_state(run_dir)
    if state is None:
        return False
    replicas = state["replicas"]
    return all(r["state"] == "ready" for r in replicas) and state["nginx"]["ready"] == len(replicas)


def wait_until(
    proc: subprocess.Popen[bytes], log: Path, condition: Callable[[], bool], timeout_s: float, what: str
) -> None:
    """Poll condition until true; fails the test, with the log's tail, if proc exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"{proc.args!r} exited with {proc.returncode} before {what}:\n{tail(log)}")
        if time.monotonic() > deadline:
            pytest.fail(f"not {what} within {timeout_s:.0f}s:\n{tail(log)}")
        time.sleep(POLL_S)


Event = dict[str, Any]


def wait_event(
    proc: subprocess.Popen[bytes],
    log: Path,
    events: Callable[[], list[Event]],
    match: Callable[[Event], bool],
    timeout_s: float,
    after: int = 0,
) -> Event:
    """The first of events()[after:] that matches, polled; fails the test if proc exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for event in events()[after:]:
            if match(event):
                return event
        if proc.poll() is not None:
            pytest.fail(f"{proc.args!r} exited with {proc.returncode}:\n{tail(log)}")
        time.sleep(POLL_S / 2)
    pytest.fail(f"no matching event within {timeout_s}s; last events: {events()[-8:]}")


def spawn(argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """argv started in a session of its own (so `stop` can find its group), output appended to log."""
    with log.open("ab") as out:
        return subprocess.Popen(
            list(argv), stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


@contextlib.contextmanager
def started(
    argv: Sequence[str],
    *,
    log: Path,
    ready: Callable[[], bool] | None = None,
    timeout_s: float = 0.0,
    env: Mapping[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """argv in a session of its own, output to log; yields once ready() holds (within timeout_s).

    On exit it is stopped with `stop`, which fails if it ignores SIGTERM or leaves a process behind.
    """
    proc = spawn(argv, log, env)
    try:
        if ready is not None:
            wait_until(proc, log, ready, timeout_s, "ready")
        yield proc
    finally:
        stop(proc)


def stop(
    proc: subprocess.Popen[bytes], timeout_s: float = STOP_TIMEOUT_S, reap_timeout_s: float = REAP_TIMEOUT_S
) -> int:
    """SIGTERM, wait up to timeout_s, else SIGKILL; returns the exit code once nothing of it is left.

    Its processes are noted before the SIGTERM: its descendants (`up` starts each replica in a session
    of its own, so outside its group) and its group. Any still alive after it exited are killed, and
    the stop fails naming them; so does a process that had to be killed.
    """
    family = _family(proc.pid)
    escalated = False
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            escalated = True
            _kill(family)
            proc.wait(reap_timeout_s)
    left = _survivors([*family, *_family(proc.pid)], reap_timeout_s)
    named = [_describe(p) for p in left]  # before the kill: a killed process has no command line to read
    _kill(left)
    assert not escalated, f"{proc.args!r} did not exit within {timeout_s:.0f}s of SIGTERM; killed"
    assert not left, f"{proc.args!r} exited {proc.returncode} leaving {named}"
    return proc.returncode


def _family(pid: int) -> list[psutil.Process]:
    """pid, its descendants and the members of its process group (pid is its group's leader)."""
    found: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        leader = psutil.Process(pid)
        found = {p.pid: p for p in [leader, *leader.children(recursive=True)]}
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(process.pid) == pid:
                found.setdefault(process.pid, process)
    return list(found.values())


def alive(pid: int) -> bool:
    """Whether pid names a live process (a zombie counts as gone)."""
    try:
        return _alive(psutil.Process(pid))
    except psutil.Error:
        return False


def _alive(process: psutil.Process) -> bool:
    """Running and not a zombie (an orphan's zombie waits for a reaper this container may lack)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _survivors(processes: list[psutil.Process], within_s: float) -> list[psutil.Process]:
    unique = list({p.pid: p for p in processes}.values())
    deadline = time.monotonic() + within_s
    while (alive := [p for p in unique if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    return alive


def _kill(processes: list[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()  # psutil checks the pid still names the process it noted


def _describe(process: psutil.Process) -> str:
    try:
        return f"{process.pid} {' '.join(process.cmdline())[:120]}"
    except psutil.Error:
        return str(process.pid)

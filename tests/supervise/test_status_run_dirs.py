"""`status` without --run-dir after `up --run-dir DIR`: it reads DIR when that is the only `up` running,
and otherwise names the run dir it read and every other `up` running (run/stacks.py's records), so a
stack elsewhere is never shown as if it were the one just started. Fake run dirs: a state file and the
lock file naming a live pid, as `up` leaves them."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hunyuan_serve.cli import main
from hunyuan_serve.run import stacks
from hunyuan_serve.run.state import STATE_FILE


def _stack(run_dir: Path, pid: int, model: str) -> Path:
    """A run dir as a running `up` (pid) keeps it: its lock naming the pid, its state file."""
    run_dir.mkdir(parents=True)
    (run_dir / "up.lock").write_text(str(pid))
    state = {"running": True, "pid": pid, "run_dir": str(run_dir), "model": model, "family": "hunyuan-mt"}
    (run_dir / STATE_FILE).write_text(json.dumps({**state, "replicas": [], "nginx": {}}))
    return run_dir


def _record(env: dict[str, str], run_dir: Path, pid: int) -> None:
    """What `up` pid records at its start (stacks.register, which records the caller's own pid)."""
    registry = Path(env["HUNYUAN_SERVE_RUN_DIR"]) / stacks.STACKS_DIR
    registry.mkdir(parents=True, exist_ok=True)
    (registry / f"{pid}.json").write_text(json.dumps({"run_dir": str(run_dir), "pid": pid}))


@pytest.fixture
def other_pid() -> Iterator[int]:
    """A second live process, standing for a second `up` (a pid stands for one `up` only)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The default run dir in tmp_path, for `status` run in this process."""
    monkeypatch.setenv("HUNYUAN_SERVE_RUN_DIR", str(tmp_path / "default"))
    return dict(os.environ)


def _status(*args: str) -> subprocess.CompletedProcess[str]:
    """`hunyuan-serve status ARGS` in this process (the environment as `env` set it), as if run."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["status", *args])
    return subprocess.CompletedProcess(["status", *args], code, out.getvalue(), err.getvalue())


def test_status_finds_the_only_up_running_though_it_has_another_run_dir(
    tmp_path: Path, env: dict[str, str]
) -> None:
    mine = _stack(tmp_path / "mine", os.getpid(), "model-mine")
    stacks.register(mine, env)
    done = _status()
    assert done.returncode == 0, done.stderr
    assert f"run dir {mine}" in done.stdout and "model model-mine" in done.stdout
    assert (
        f"hunyuan-serve: run dir {mine}: the only `up` running (pass --run-dir to read another)"
        in done.stdout
    )
    assert json.loads(_status("--json").stdout)["run_dir"] == str(mine)


def test_status_names_the_other_up_when_the_default_run_dir_has_one(
    tmp_path: Path, env: dict[str, str], other_pid: int
) -> None:
    default = _stack(tmp_path / "default", os.getpid(), "model-default")
    mine = _stack(tmp_path / "mine", other_pid, "model-mine")
    _record(env, mine, other_pid)
    done = _status()
    assert done.returncode == 0, done.stderr
    assert f"model model-default (prompt family hunyuan-mt), run dir {default}" in done.stdout
    note = f"hunyuan-serve: also running: `up` pid {other_pid} with run dir {mine} (status --run-dir {mine})"
    assert note in done.stdout
    as_json = _status("--json")
    assert json.loads(as_json.stdout)["run_dir"] == str(default) and note in as_json.stderr
    assert "also running" not in _status("--run-dir", str(mine)).stdout  # asked for: that one only


def test_an_up_gone_is_neither_read_nor_named(tmp_path: Path, env: dict[str, str], other_pid: int) -> None:
    gone = _stack(tmp_path / "gone", 2**22 + 7, "model-gone")  # no such pid (above pid_max's default)
    _record(env, gone, 2**22 + 7)
    later = _stack(tmp_path / "later", other_pid, "model-later")
    _record(env, later, 1)  # pid 1 is alive but never this run dir's `up`: its lock names another pid
    done = _status()
    assert done.returncode == 1 and "no `up` has run with run dir" in done.stderr, done.stderr
    assert "also running" not in done.stdout + done.stderr
    assert stacks.running(env) == [] and not list((tmp_path / "default" / stacks.STACKS_DIR).glob("*.json"))

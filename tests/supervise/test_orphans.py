"""What `up` does at start with a killed `up`'s leftovers, on real processes: a real Nginx master of the run
dir is stopped, a replica process of the run dir that outlives the wait is refused by pid."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hunyuan_serve.config import build_config
from hunyuan_serve.run.procs import children, cmdline, pid_alive
from hunyuan_serve.supervise.preflight import clear_leftovers
from tests.support.stacks import free_port

NGINX = Path("/usr/sbin/nginx")
QUICK = {"replica": {"parent_check_s": 0, "graceful_shutdown_s": 0}, "supervisor": {"kill_timeout_s": 0.5}}


@pytest.fixture
def leftover_nginx(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """An Nginx master started the way `up` starts its own, in run_dir/nginx, in a session of its own."""
    if not NGINX.exists():
        pytest.skip("nginx is not installed")
    prefix = tmp_path / "run" / "nginx"
    (prefix / "logs").mkdir(parents=True)
    conf = prefix / "nginx.conf"
    conf.write_text(
        f"daemon off;\npid {prefix}/nginx.pid;\nerror_log {prefix}/logs/error.log;\nevents {{}}\n"
        f"http {{ access_log off; server {{ listen 127.0.0.1:{free_port()}; return 200; }} }}\n"
    )
    argv = [str(NGINX), "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "logs" / "error.log")]
    proc = subprocess.Popen(argv, start_new_session=True, stderr=subprocess.DEVNULL)
    # Up once its worker runs: a master killed while it forks the worker could leave that one behind.
    while not ((prefix / "nginx.pid").exists() and children(proc.pid)) and proc.poll() is None:
        time.sleep(0.02)
    try:
        yield tmp_path / "run", proc
    finally:
        with contextlib.suppress(ProcessLookupError):  # its workers too: a SIGKILL-ed master's stay
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_a_leftover_nginx_of_the_run_dir_is_stopped(
    leftover_nginx: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    run_dir, proc = leftover_nginx
    found, problem = clear_leftovers(build_config(QUICK, {}), run_dir)
    assert problem is None
    assert found == [{"event": "leftover_nginx_stopped", "pid": proc.pid}]
    assert proc.wait(10) == 0  # QUIT: a graceful exit
    assert clear_leftovers(build_config(QUICK, {}), run_dir) == ([], None)  # a stale pid file: nothing


def test_another_run_dirs_nginx_is_left_alone(leftover_nginx: tuple[Path, subprocess.Popen[bytes]]) -> None:
    run_dir, proc = leftover_nginx
    other = run_dir.parent / "other"
    (other / "nginx").mkdir(parents=True)
    (other / "nginx" / "nginx.pid").write_text(f"{proc.pid}\n")  # its pid, not its config
    assert clear_leftovers(build_config(QUICK, {}), other) == ([], None)
    assert proc.poll() is None


def test_a_replica_of_the_run_dir_still_running_is_refused_by_pid(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # A process whose command line is a replica's of this run dir, and which ignores its parent.
    argv = [sys.executable, "-c", "import time; time.sleep(120)", "hunyuan_serve", "replica"]
    argv += ["--config", f"{run_dir}/replica-0.yaml"]
    proc = subprocess.Popen(argv, start_new_session=True)
    while "replica --config" not in (cmdline(proc.pid) or "") and proc.poll() is None:
        time.sleep(0.02)  # until its command line is the interpreter's, on a loaded machine too
    try:
        found, problem = clear_leftovers(build_config(QUICK, {}), run_dir)
        assert found == [{"event": "leftover_replicas_waited", "pids": [proc.pid], "left": [proc.pid]}]
        assert problem is not None and f"pid {proc.pid}" in problem and str(run_dir) in problem
        assert pid_alive(proc.pid)  # named, not killed: it is the user's to stop
    finally:
        proc.kill()
        proc.wait(10)

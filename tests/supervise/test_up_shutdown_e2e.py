"""`hunyuan-serve up` stopped while its two replicas load their engines leaves no process and no port.

A stack of its own (the settings of tests/support/restart_stack.py): it is stopped mid-start, which the
shared stack must not be. Not a user of a shared stack, so it runs after their users have stopped
them and four engines never share two cores.
"""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from hunyuan_serve.run.ports import port_problem
from hunyuan_serve.run.state import read_state
from tests.support.restart_stack import START_TIMEOUT_S, UpStack, start
from tests.support.stacks import alive, stop, wait_until

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
    pytest.mark.timeout(2 * START_TIMEOUT_S),
]


def _loading_engines(stack: UpStack) -> bool:
    """Nginx up, every replica started and its engine's processes spawned (none need be ready yet)."""
    state = read_state(stack.run_dir)
    if state is None or not state["nginx"].get("pid") or not all(r["pid"] for r in state["replicas"]):
        return False
    try:
        return all(psutil.Process(r["pid"]).children() for r in state["replicas"])
    except psutil.Error:
        return False


def test_clean_shutdown_mid_start_leaves_no_process(tiny_model_dir: Path, tmp_path: Path) -> None:
    # Stopped while its replicas load their engines, the stop most likely to leave an engine behind.
    stack = start(tiny_model_dir, tmp_path)
    try:
        wait_until(stack.proc, stack.log, lambda: _loading_engines(stack), START_TIMEOUT_S, "loading")
        state = stack.state()
        nginx = psutil.Process(state["nginx"]["pid"])
        pids = {stack.proc.pid, nginx.pid, *(p.pid for p in nginx.children())}
        for replica in state["replicas"]:
            pids |= {p.pid for p in psutil.Process(replica["pid"]).children(recursive=True)}
            pids.add(replica["pid"])
        mark = len(stack.events())
        assert stop(stack.proc) == 0  # it also fails if any process of the stack is left
    finally:
        stop(stack.proc)
    assert [pid for pid in pids if alive(pid)] == []
    events = [e["event"] for e in stack.events()[mark:]]
    # Nginx first (no new request reaches a stopping replica), `stopped` last, each once.
    assert [e for e in events if e in ("stopping", "nginx_stopped", "stopped")] == [
        "stopping",
        "nginx_stopped",
        "stopped",
    ]
    assert events[-1] == "stopped"
    assert port_problem("127.0.0.1", stack.port) is None
    assert all(port_problem("127.0.0.1", r["port"]) is None for r in state["replicas"])
    assert stack.state()["running"] is False

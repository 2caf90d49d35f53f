"""When the engine core is forked, and that a forked child keeps no listening socket (a real fork)."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

from hunyuan_serve.config import EngineConfig
from hunyuan_serve.replica.engine.fork import (
    MULTIPROC_METHOD_ENV,
    forget_the_front,
    forks_engine_core,
    use_fork,
)


@pytest.mark.parametrize(
    ("settings", "on_cpu", "expected"),
    [
        ({}, True, True),
        ({}, False, False),  # a GPU replica: vLLM spawns once CUDA is initialised, and so do we
        ({"cpu_fork_engine_core": False}, True, False),
        ({"cpu_worker_process": True}, True, False),  # vLLM binds a spawned worker's CPUs itself
        ({"tensor_parallel_size": 2}, True, False),
    ],
)
def test_the_engine_core_is_forked_on_one_cpu_device_only(
    settings: dict[str, Any], on_cpu: bool, expected: bool
) -> None:
    assert forks_engine_core(EngineConfig(**settings), on_cpu) is expected


def test_use_fork_overrides_the_spawn_vllms_cpu_platform_wrote() -> None:
    environ = {MULTIPROC_METHOD_ENV: "spawn"}
    use_fork(environ)
    assert environ[MULTIPROC_METHOD_ENV] == "fork"


def test_a_forked_child_closes_the_fronts_sockets_and_keeps_the_others() -> None:
    left, right = socket.socketpair()
    with socket.socket() as listener, socket.socket() as client, left, right:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client.connect(listener.getsockname())
        accepted = listener.accept()[0]
        report, done = os.pipe(), os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: what the at-fork handler does there, reported through a pipe
            forget_the_front()
            os.write(report[1], bytes(_open(s.fileno()) for s in (listener, client, accepted, left)))
            os.read(done[0], 1)  # alive until the parent has looked
            os._exit(0)
        try:
            # Listening and TCP gone; a local pair (the kind vLLM's engine core talks through) kept.
            assert list(os.read(report[0], 4)) == [0, 0, 0, 1]
            assert all(_open(s.fileno()) for s in (listener, client, right))  # the parent's own
            # The front closing a connection ends it while the child lives: the child holds no copy.
            accepted.close()
            client.settimeout(5)
            assert client.recv(1) == b""
        finally:
            os.write(done[1], b"x")
            os.waitpid(pid, 0)
            for fd in (*report, *done):
                os.close(fd)


def _open(fd: int) -> int:
    try:
        os.fstat(fd)
    except OSError:
        return 0
    return 1

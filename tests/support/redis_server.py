"""A real Debian redis-server on a free loopback port, in a directory of its own, to kill and restart."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stacks import free_port

REDIS_SERVER = "/usr/bin/redis-server"
START_TIMEOUT_S = 20.0
POLL_S = 0.05


class RedisServer:
    """One redis-server, always on the same port, with no persistence: a restart starts it empty."""

    def __init__(self, workdir: Path, port: int) -> None:
        self.workdir = workdir
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
        argv += ["no", "--dir", str(self.workdir), "--protected-mode", "no"]
        with (self.workdir / "redis.log").open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                log_text = (self.workdir / "redis.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"redis-server did not start on port {self.port}:\n{log_text}")
            time.sleep(POLL_S)

    def answers(self) -> bool:
        """PING over a plain socket answers +PONG."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def command(self, *args: str) -> str:
        """One command through the synchronous Python client, for the tests' own checks."""
        import redis

        with redis.Redis(port=self.port, decode_responses=True, socket_timeout=5) as client:
            return str(client.execute_command(*args))

    def pause(self) -> None:
        """SIGSTOP: Redis still accepts connections (the kernel does) but answers nothing, as if slow."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is flushed or closed cleanly."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[RedisServer]:
    """A started redis-server, killed on exit whatever the test did to it."""
    if not Path(REDIS_SERVER).exists() and not shutil.which("redis-server"):
        pytest.fail(f"{REDIS_SERVER} missing: apt-get install redis-server (deploy/install.sh)")
    server = RedisServer(workdir, free_port())
    server.start()
    try:
        yield server
    finally:
        server.kill()

"""A real Debian redis-server on a free loopback port, in a directory of its own, to kill and restart."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.stacks import free_port

REDIS_SERVER = "/usr/bin/redis-server"
START_TIMEOUT_S = 20.0
POLL_S = 0.05


@dataclass(frozen=True)
class RedisTls:
    """Redis's TLS port: its certificate and key, and the CA its clients' certificates must chain to."""

    cert: Path
    key: Path
    ca: Path


class RedisServer:
    """One redis-server, always on the same port, with no persistence: a restart starts it empty.
    With tls, that port speaks TLS only (rediss://) and wants a client certificate signed by tls.ca."""

    def __init__(self, workdir: Path, port: int, tls: RedisTls | None = None) -> None:
        self.workdir = workdir
        self.port = port
        self.tls = tls
        self.url = f"{'rediss' if tls else 'redis'}://127.0.0.1:{port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def _port_flags(self) -> list[str]:
        if self.tls is None:
            return ["--port", str(self.port)]
        tls = self.tls
        files = ["--tls-cert-file", str(tls.cert), "--tls-key-file", str(tls.key), "--tls-ca-cert-file"]
        return ["--port", "0", "--tls-port", str(self.port), *files, str(tls.ca), "--tls-auth-clients", "yes"]

    def start(self) -> None:
        argv = [REDIS_SERVER, *self._port_flags(), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
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
        """PING over a plain socket (a TLS one on a TLS port: no client certificate, so any answer
        from the handshake on shows the server up) answers +PONG."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                if self.tls is not None:
                    return self._handshakes(sock)
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def _handshakes(self, sock: socket.socket) -> bool:
        assert self.tls is not None
        context = ssl.create_default_context(cafile=str(self.tls.ca))
        with context.wrap_socket(sock, server_hostname="127.0.0.1"):
            return True

    def command(self, *args: str, client_cert: tuple[Path, Path] | None = None) -> str:
        """One command through the synchronous Python client, for the tests' own checks; on a TLS port
        with client_cert (a certificate and key the CA signed)."""
        import redis

        tls: dict[str, object] = {}
        if self.tls is not None:
            assert client_cert is not None, "a TLS Redis wants a client certificate"
            tls = {"ssl": True, "ssl_ca_certs": str(self.tls.ca)}
            tls |= {"ssl_certfile": str(client_cert[0]), "ssl_keyfile": str(client_cert[1])}
        with redis.Redis(port=self.port, decode_responses=True, socket_timeout=5, **tls) as client:  # type: ignore[arg-type]
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
def redis_server(workdir: Path, tls: RedisTls | None = None) -> Iterator[RedisServer]:
    """A started redis-server (TLS only with tls), killed on exit whatever the test did to it."""
    if not Path(REDIS_SERVER).exists() and not shutil.which("redis-server"):
        pytest.fail(f"{REDIS_SERVER} missing: apt-get install redis-server (deploy/install.sh)")
    server = RedisServer(workdir, free_port(), tls)
    server.start()
    try:
        yield server
    finally:
        server.kill()

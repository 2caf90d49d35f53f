"""A non-streaming answer leaves the replica in one write (status line, headers and body), seen by strace
on a real uvicorn server and by a raw socket; uvicorn's own protocol, for contrast, writes twice."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.support.stacks import free_port, wait_until

STRACE = "strace"
SERVER = Path(__file__).with_name("one_write_server.py")
REQUEST = b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
REPO = Path(__file__).resolve().parents[2]
# strace: `sendto(7, "HTTP/1.1 200 OK"..., 180123, 0, NULL, 0) = 180123`
_SEND = re.compile(r'^\d+\s+(?:write|sendto|sendmsg)\((\d+), "(.*?)"(?:\.\.\.)?, .*\)\s+=\s+(\d+)$')


def _post(port: int) -> bytes:
    """One request on a raw socket; everything the server sent until it closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        )
        chunks = []
        while chunk := sock.recv(1 << 20):
            chunks.append(chunk)
    return b"".join(chunks)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


def _sends(trace: Path) -> list[tuple[str, int]]:
    """(first bytes, bytes written) of each write to a socket after the server started listening."""
    out = []
    for line in trace.read_text(errors="replace").splitlines():
        match = _SEND.match(line)
        if match and int(match.group(1)) > 2:
            out.append((match.group(2), int(match.group(3))))
    return out


@pytest.mark.parametrize(("protocol", "writes"), [("onewrite", 1), ("httptools", 2)])
def test_response_leaves_in_one_write(tmp_path: Path, protocol: str, writes: int) -> None:
    # deploy/install.sh installs strace: a machine without it is set up wrong, and a skip would hide that.
    if shutil.which(STRACE) is None:
        pytest.fail(f"{STRACE} missing: run deploy/install.sh (apt package strace)")
    port, trace = free_port(), tmp_path / "strace.txt"
    argv = [STRACE, "-f", "-qq", "-s", "16", "-e", "trace=write,sendto,sendmsg", "-o", str(trace)]
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [*argv, sys.executable, str(SERVER), str(port), protocol], cwd=REPO, stdout=out, stderr=out
        )
    try:
        wait_until(server, log, lambda: _listening(port), 60, "the server listening")
        before = len(_sends(trace))
        answer = _post(port)
    finally:
        # strace passes no signal on: end the traced server, and strace ends with it.
        for child in psutil.Process(server.pid).children():
            child.terminate()
        server.wait(30)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and body.endswith(b'"END-OF-BODY"}'), answer[:200]
    sends = _sends(trace)[before:]
    response = [i for i, (start, _) in enumerate(sends) if start.startswith("HTTP/1.1 200")]
    assert len(response) == 1, sends
    first = response[0]
    sent = sends[first : first + writes]
    assert sum(n for _, n in sent) == len(answer), (sent, len(answer))
    if writes == 1:
        assert sends[first][1] == len(answer)  # status line, headers and the whole body in one send()
    else:
        assert sends[first][1] == len(head) + 4  # uvicorn's own: the headers alone, then the body

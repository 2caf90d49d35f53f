"""Is a TCP port free, and if not, which process holds it (from /proc, no extra tools)."""

from __future__ import annotations

import errno
import os
import socket


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as fh:
                lines = fh.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    return inodes


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _start_time(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def port_holders(port: int) -> list[str]:
    """'pid N (command line)' of each process listening on port that this user can see, oldest first.

    Oldest first puts a parent (an Nginx master) before the workers that share its socket.
    """
    wanted = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    found: list[tuple[int, str]] = []
    if not wanted:
        return []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"{fd_dir}/{fd}") in wanted:
                    found.append((_start_time(pid), f"pid {pid} ({_cmdline(pid)[:120]})"))
                    break
            except OSError:
                continue
    return [desc for _, desc in sorted(found)]


def port_problem(host: str, port: int) -> str | None:
    """None when `host:port` can be bound now, else a message that says what holds it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as err:
            if err.errno != errno.EADDRINUSE:
                return f"cannot bind {host}:{port}: {err.strerror}"
            holders = port_holders(port)
            who = ", ".join(holders) if holders else "a process this user cannot see"
            return f"port {port} on {host} is in use by {who}"
    return None

"""Is a TCP port free, and if not, which process holds it (from /proc, no extra tools); free ports."""

from __future__ import annotations

import errno
import os
import random
import socket
from pathlib import Path

# The lowest port free_ports draws: above the well-known and common registered services' ports.
LOWEST_PORT = 20000
# Its own generator, seeded from the OS: two processes that seeded the global one alike (test suites
# do) would draw the very same ports in the same order, and collide on every run.
_PORTS = random.SystemRandom()


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel lends outgoing connections (net.ipv4.ip_local_port_range)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[:2]
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` consecutive ports on `host` that nothing holds now (replicas listen on base_port + i).

    Drawn below the kernel's ephemeral range: a replica restarted later binds its port again, and an
    outgoing connection must not have taken it meanwhile. A random start keeps runs at the same time
    apart.
    """
    ceiling = ephemeral_range()[0] - count
    for _ in range(500):
        base = _PORTS.randrange(LOWEST_PORT, ceiling)
        if all(port_problem(host, base + i) is None for i in range(count)):
            return [base + i for i in range(count)]
    raise RuntimeError(f"no {count} consecutive free ports on {host} below {ceiling + count}")


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
            return f"port {port} on {host} is in use by {_holder(port)}"
    return None


def _holder(port: int) -> str:
    holders = port_holders(port)
    if holders:
        return ", ".join(holders)
    if _listening_inodes(port):
        return "a process this user cannot see"
    low, high = ephemeral_range()
    if low <= port <= high:  # the kernel lent it to an outgoing connection, and may again
        return (
            f"a connection, and nothing listens on it: the kernel lends ports {low}-{high} to outgoing "
            f"connections, so choose one below {low}"
        )
    return "a connection, and nothing listens on it"

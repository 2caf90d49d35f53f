"""Linux network namespaces as hosts for tests and benchmarks: a bridge, one veth and address each."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from hunyuan_serve.run.procs import pid_alive

# Every name this module makes starts with it, then the run's id: a sweep can tell ours, and whose.
PREFIX = "hs"
SUBNET = "10.77"  # 10.77.N.0/24, N free on this machine when the run starts
FIRST_HOST = 10  # host i gets 10.77.N.(10 + i); the root namespace (the gateway) gets .1
LOCK = Path("/tmp/hs-netns.lock")  # runs pick their subnet one at a time
PID_DIGITS = 5  # base36: enough for any pid up to 60 million
KILL_WAIT_S = 10.0
POLL_S = 0.05

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


def run_ip(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """The real runner: the command's exit status and output, never raising on a failure."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)


@dataclass(frozen=True)
class Host:
    """One namespace: its name, the veth's two ends (root side, inside) and its address."""

    name: str
    netns: str
    link: str
    peer: str
    addr: str

    def argv(self, argv: Sequence[str]) -> list[str]:
        """argv run inside the host (`ip netns exec` execs it: the pid is the command's own)."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def url(self, port: int) -> str:
        return f"http://{self.addr}:{port}"


@dataclass(frozen=True)
class Network:
    """The plan of one run: the bridge in the root namespace, its address there, and the hosts."""

    run: str
    bridge: str
    addr: str
    hosts: tuple[Host, ...]
    prefix_len: int = 24

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)


def base36(number: int, width: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while number:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
    return out.rjust(width, "0")


def run_id(pid: int, salt: str) -> str:
    """The owner's pid in base36 and a salt: unique per run, and a sweep can tell if its owner lives."""
    return base36(pid, PID_DIGITS) + salt


def owner_pid(run: str) -> int:
    return int(run[:PID_DIGITS], 36)


def plan_network(run: str, names: Sequence[str], octet: int) -> Network:
    """Names (Linux allows 15 characters per link) and addresses of a run's bridge and hosts."""
    if not 0 <= octet <= 255 or len(names) > 200:
        raise ValueError(f"cannot place {len(names)} hosts on {SUBNET}.{octet}.0/24")
    hosts = tuple(
        Host(
            name=name,
            netns=f"{PREFIX}-{run}-{name}",
            link=f"{PREFIX}v{run}{i}",
            peer=f"{PREFIX}p{run}{i}",
            addr=f"{SUBNET}.{octet}.{FIRST_HOST + i}",
        )
        for i, name in enumerate(names)
    )
    for host in hosts:
        if len(host.link) > 15:
            raise ValueError(f"link name {host.link!r} is over Linux's 15 characters")
    return Network(run, f"{PREFIX}b{run}", f"{SUBNET}.{octet}.1", hosts)


def free_octet(addresses: str) -> int:
    """The lowest N whose 10.77.N.0/24 no interface uses, from `ip -4 -o addr show`."""
    used = {int(n) for n in re.findall(rf"inet {re.escape(SUBNET)}\.(\d+)\.", addresses)}
    free = [n for n in range(256) if n not in used]
    if not free:
        raise RuntimeError(f"every {SUBNET}.N.0/24 is in use")
    return free[0]


def setup_commands(net: Network) -> list[list[str]]:
    """The bridge with the root's address, then per host its namespace, veth, address and loopback."""
    cmds = [
        ["ip", "link", "add", net.bridge, "type", "bridge"],
        ["ip", "addr", "add", f"{net.addr}/{net.prefix_len}", "dev", net.bridge],
        ["ip", "link", "set", net.bridge, "up"],
    ]
    for h in net.hosts:
        cmds += [
            ["ip", "netns", "add", h.netns],
            ["ip", "link", "add", h.link, "type", "veth", "peer", "name", h.peer, "netns", h.netns],
            ["ip", "link", "set", h.link, "master", net.bridge],
            ["ip", "link", "set", h.link, "up"],
            ["ip", "-n", h.netns, "addr", "add", f"{h.addr}/{net.prefix_len}", "dev", h.peer],
            ["ip", "-n", h.netns, "link", "set", h.peer, "up"],
            ["ip", "-n", h.netns, "link", "set", "lo", "up"],
        ]
    return cmds


def teardown_commands(net: Network) -> list[list[str]]:
    """Each namespace (its end of the veth goes with it, and so the pair), any link left, the bridge."""
    cmds = [["ip", "netns", "del", h.netns] for h in net.hosts]
    cmds += [["ip", "link", "del", h.link] for h in net.hosts]
    return [*cmds, ["ip", "link", "del", net.bridge]]


def cut_command(host: Host) -> list[str]:
    """The host's link down at the bridge: its packets are dropped silently, as on a cut cable."""
    return ["ip", "link", "set", host.link, "down"]


def restore_command(host: Host) -> list[str]:
    return ["ip", "link", "set", host.link, "up"]


def leftovers(run: str, netns_list: str, links: str) -> list[str]:
    """Names of this run's namespaces and links still there, from `ip netns list` and `ip -o link`."""
    found = [line.split()[0] for line in netns_list.splitlines() if line.startswith(f"{PREFIX}-{run}-")]
    pattern = re.compile(rf"^\d+: ({PREFIX}[bvp]{re.escape(run)}\d*)[@:]")
    return found + [m.group(1) for line in links.splitlines() if (m := pattern.match(line))]


def stale_runs(netns_list: str, alive: Callable[[int], bool]) -> set[str]:
    """Runs whose namespaces are still listed though the process that made them is gone."""
    pattern = re.compile(rf"^{PREFIX}-([0-9a-z]{{{PID_DIGITS}}}[0-9a-z]+)-")
    runs = {m.group(1) for line in netns_list.splitlines() if (m := pattern.match(line))}
    return {run for run in runs if not alive(owner_pid(run))}


def unavailable(runner: Runner = run_ip) -> str | None:
    """Why namespaces cannot be made here (None: they can): not root, no `ip`, or the kernel refuses."""
    if os.geteuid() != 0:
        return f"network namespaces need root; this test runs as uid {os.geteuid()}"
    if shutil.which("ip") is None:
        return "no `ip` command (Debian package iproute2) to make network namespaces with"
    probe = f"{PREFIX}-probe-{os.getpid()}"
    made = runner(["ip", "netns", "add", probe])
    if made.returncode != 0:
        return f"`ip netns add` failed here: {made.stderr.strip()}"
    runner(["ip", "netns", "del", probe])
    return None


class Lab:
    """A made network: run processes in a host, kill a host whole, cut and restore its link."""

    def __init__(self, net: Network, runner: Runner = run_ip) -> None:
        self.net = net
        self._run = runner

    def host(self, name: str) -> Host:
        return self.net.host(name)

    def _check(self, argv: Sequence[str]) -> str:
        done = self._run(argv)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def pids(self, name: str) -> list[int]:
        """Every process in the host's namespace (zombies have none, so they are not listed)."""
        out = self._run(["ip", "netns", "pids", self.host(name).netns]).stdout
        return [int(p) for p in out.split() if p.isdigit()]

    def kill_all(self, name: str) -> list[int]:
        """kill -9 of every process of the host at once; returns their pids once all are gone."""
        killed: list[int] = []
        deadline = time.monotonic() + KILL_WAIT_S
        while pids := self.pids(name):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            killed += [p for p in pids if p not in killed]
            if time.monotonic() > deadline:
                raise RuntimeError(f"host {name}: pids {pids} outlived kill -9 for {KILL_WAIT_S:.0f}s")
            time.sleep(POLL_S)
        return killed

    def cut(self, name: str) -> None:
        self._check(cut_command(self.host(name)))

    def restore(self, name: str) -> None:
        self._check(restore_command(self.host(name)))

    def leftovers(self) -> list[str]:
        netns = self._run(["ip", "netns", "list"]).stdout
        return leftovers(self.net.run, netns, self._run(["ip", "-o", "link"]).stdout)


def sweep(runner: Runner = run_ip, alive: Callable[[int], bool] = pid_alive) -> set[str]:
    """Remove what runs killed before their cleanup (a SIGKILLed pytest) left; returns their ids."""
    netns = runner(["ip", "netns", "list"]).stdout
    runs = stale_runs(netns, alive)
    for run in runs:
        names = leftovers(run, netns, runner(["ip", "-o", "link"]).stdout)
        for name in names:
            if name.startswith(f"{PREFIX}-"):
                out = runner(["ip", "netns", "pids", name]).stdout
                for pid in (int(p) for p in out.split() if p.isdigit()):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                runner(["ip", "netns", "del", name])
            else:
                runner(["ip", "link", "del", name])
    return runs


def _teardown(lab: Lab) -> list[str]:
    """Kill every process of every host, remove everything; returns what is still there after."""
    for h in lab.net.hosts:
        with contextlib.suppress(RuntimeError):
            lab.kill_all(h.name)
    for argv in teardown_commands(lab.net):
        lab._run(argv)  # a link may be gone already, with its namespace
    return lab.leftovers()


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def hosts(names: Sequence[str], runner: Runner = run_ip) -> Iterator[Lab]:
    """A network of one namespace per name, removed on exit (test failed or not); fails if any is left."""
    with _locked():
        sweep(runner)
        octet = free_octet(runner(["ip", "-4", "-o", "addr", "show"]).stdout)
        lab = Lab(plan_network(run_id(os.getpid(), secrets.token_hex(1)), names, octet), runner)
        try:
            for argv in setup_commands(lab.net):
                lab._check(argv)
        except BaseException:
            _teardown(lab)
            raise
    try:
        yield lab
    finally:
        left = _teardown(lab)
        if left:
            raise RuntimeError(f"network namespaces left behind: {left}")

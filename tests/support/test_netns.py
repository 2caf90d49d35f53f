"""The namespace helper: its plan and parsing (pure), then real namespaces with a small server in one."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from bench import netns
from tests.support.stacks import started, stop, wait_until

LINKS = """1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN
7: hsb01abcx9: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP
8: hsv01abcx90@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 master hsb01abcx9
9: hsv01abcx91@if2: <BROADCAST,MULTICAST> mtu 1500 master hsb01abcx9
10: hsv0zzzzz10@if2: <BROADCAST,MULTICAST> mtu 1500
"""


def test_run_id_carries_its_owners_pid() -> None:
    run = netns.run_id(4194304, "a7")
    assert run == "2hwcga7" and netns.owner_pid(run) == 4194304
    assert netns.owner_pid(netns.run_id(1, "00")) == 1


def test_plan_gives_unique_short_names_and_addresses_on_one_subnet() -> None:
    net = netns.plan_network("01abcx9", ["a", "b"], 42)
    assert net.bridge == "hsb01abcx9" and net.addr == "10.77.42.1"
    a, b = net.hosts
    assert (a.netns, a.link, a.peer, a.addr) == ("hs-01abcx9-a", "hsv01abcx90", "hsp01abcx90", "10.77.42.10")
    assert (b.netns, b.addr) == ("hs-01abcx9-b", "10.77.42.11")
    assert all(len(name) <= 15 for h in net.hosts for name in (h.link, h.peer))
    assert net.host("b") is b
    assert a.argv(["sleep", "1"]) == ["ip", "netns", "exec", "hs-01abcx9-a", "sleep", "1"]
    assert b.url(8080) == "http://10.77.42.11:8080"
    with pytest.raises(ValueError, match="15 characters"):
        netns.plan_network("0123456789abc", ["a"], 1)
    with pytest.raises(ValueError, match=r"10\.77\.300"):
        netns.plan_network("01abcx9", ["a"], 300)


def test_free_octet_skips_subnets_in_use() -> None:
    addrs = "4: eth0    inet 10.77.0.1/24 brd ...\n5: x    inet 10.77.1.1/24\n6: y    inet 10.7.2.1/24\n"
    assert netns.free_octet(addrs) == 2
    assert netns.free_octet("") == 0
    with pytest.raises(RuntimeError, match="in use"):
        netns.free_octet("".join(f"inet 10.77.{n}.1/24\n" for n in range(256)))


def test_setup_puts_each_host_on_the_bridge_with_its_address_and_loopback() -> None:
    net = netns.plan_network("01abcx9", ["a"], 5)
    cmds = [" ".join(c) for c in netns.setup_commands(net)]
    assert cmds[:3] == [
        "ip link add hsb01abcx9 type bridge",
        "ip addr add 10.77.5.1/24 dev hsb01abcx9",
        "ip link set hsb01abcx9 up",
    ]
    assert cmds[3:] == [
        "ip netns add hs-01abcx9-a",
        "ip link add hsv01abcx90 type veth peer name hsp01abcx90 netns hs-01abcx9-a",
        "ip link set hsv01abcx90 master hsb01abcx9",
        "ip link set hsv01abcx90 up",
        "ip -n hs-01abcx9-a addr add 10.77.5.10/24 dev hsp01abcx90",
        "ip -n hs-01abcx9-a link set hsp01abcx90 up",
        "ip -n hs-01abcx9-a link set lo up",
    ]
    # Namespaces go first (their veth ends with them), the bridge last.
    down = [" ".join(c) for c in netns.teardown_commands(net)]
    assert down == ["ip netns del hs-01abcx9-a", "ip link del hsv01abcx90", "ip link del hsb01abcx9"]
    assert netns.cut_command(net.hosts[0]) == ["ip", "link", "set", "hsv01abcx90", "down"]
    assert netns.restore_command(net.hosts[0]) == ["ip", "link", "set", "hsv01abcx90", "up"]


def test_leftovers_and_stale_runs_are_read_from_ip_output() -> None:
    listed = "hs-01abcx9-a (id: 3)\nhs-0zzzzz1-a\nother-ns\n"
    assert netns.leftovers("01abcx9", listed, LINKS) == [
        "hs-01abcx9-a",
        "hsb01abcx9",
        "hsv01abcx90",
        "hsv01abcx91",
    ]
    assert netns.leftovers("0zzzzz1", listed, LINKS) == ["hs-0zzzzz1-a", "hsv0zzzzz10"]
    assert netns.leftovers("01abcx9", "", "1: lo: <LOOPBACK>\n") == []
    living = {netns.owner_pid("01abcx9")}
    assert netns.stale_runs(listed, lambda pid: pid in living) == {"0zzzzz1"}


class Recorder:
    """A runner that records commands and fails the ones named."""

    def __init__(self, failing: Sequence[str] = (), netns_list: str = "") -> None:
        self.calls: list[str] = []
        self.failing = failing
        self.netns_list = netns_list

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        line = " ".join(argv)
        self.calls.append(line)
        out = self.netns_list if line == "ip netns list" else ""
        code = 1 if any(f in line for f in self.failing) else 0
        refusal = "RTNETLINK answers: Operation not permitted"
        return subprocess.CompletedProcess(list(argv), code, out, refusal)


def test_unavailable_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert netns.unavailable(Recorder()) == "network namespaces need root; this test runs as uid 1000"
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda _: None)
    assert "no `ip` command" in str(netns.unavailable(Recorder()))
    monkeypatch.setattr(netns.shutil, "which", lambda _: "/usr/sbin/ip")
    refused = netns.unavailable(Recorder(failing=["netns add"]))
    assert refused == "`ip netns add` failed here: RTNETLINK answers: Operation not permitted"
    assert netns.unavailable(Recorder()) is None


def test_sweep_removes_only_runs_whose_owner_is_gone() -> None:
    runner = Recorder(netns_list="hs-01abcx9-a\nhs-0zzzzz1-a\n")
    living = {netns.owner_pid("01abcx9")}
    assert netns.sweep(runner, lambda pid: pid in living) == {"0zzzzz1"}
    assert "ip netns del hs-0zzzzz1-a" in runner.calls
    assert not any("01abcx9" in call for call in runner.calls)


def test_a_failed_setup_removes_what_it_made(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(netns, "LOCK", tmp_path / "lock")
    runner = Recorder(failing=["type veth"])
    with pytest.raises(RuntimeError, match="type veth"), netns.hosts(["a"], runner):
        pytest.fail("must not be reached")
    made = [c for c in runner.calls if c.startswith(("ip link add hsb", "ip netns add hs-"))]
    assert len(made) == 2
    assert [c for c in runner.calls if c.startswith(("ip netns del hs-", "ip link del hsb"))] == [
        made[1].replace("add", "del"),
        made[0].replace(" add", " del").removesuffix(" type bridge"),
    ]


# A server that answers GET / with the address it is bound to.
SERVER = (
    "import http.server,sys;"
    "h=type('H',(http.server.BaseHTTPRequestHandler,),{'do_GET':lambda s:(s.send_response(200),"
    "s.end_headers(),s.wfile.write(sys.argv[1].encode())),'log_message':lambda *a:None});"
    "http.server.ThreadingHTTPServer((sys.argv[1],8999),h).serve_forever()"
)


UNAVAILABLE = netns.unavailable()


def _get(url: str, timeout: float = 2.0) -> str:
    try:
        return httpx.get(url, timeout=timeout, trust_env=False).text
    except httpx.TransportError as err:
        return type(err).__name__


@pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))
def test_real_hosts_serve_are_cut_restored_killed_and_removed(tmp_path: Path) -> None:
    with netns.hosts(["a", "b"]) as lab:
        a, b = lab.host("a"), lab.host("b")
        log = tmp_path / "a.log"
        with started(a.argv([sys.executable, "-c", SERVER, a.addr]), log=log) as server:
            wait_until(server, log, lambda: _get(a.url(8999)) == a.addr, 30, "serving in host a")
            assert lab.pids("a") == [server.pid] and lab.pids("b") == []
            lab.cut("a")
            assert _get(a.url(8999), timeout=1.0) == "ConnectTimeout"  # dropped, not refused
            lab.restore("a")
            deadline = time.monotonic() + 10
            while _get(a.url(8999)) != a.addr:
                assert time.monotonic() < deadline, "host a not reachable after restore"
                time.sleep(0.05)
            # b's namespace is its own: nothing listens on 8999 there.
            assert _get(b.url(8999)) == "ConnectError"
            sleeper = subprocess.Popen(a.argv(["sleep", "60"]))
            assert sorted(lab.kill_all("a")) == sorted([server.pid, sleeper.pid])
            assert lab.pids("a") == [] and sleeper.wait(5) == -9
            assert stop(server) == -9
        run = lab.net.run
    assert netns.leftovers(run, netns.run_ip(["ip", "netns", "list"]).stdout, "") == []
    assert run not in netns.run_ip(["ip", "-o", "link"]).stdout

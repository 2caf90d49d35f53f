"""Gateway histories: the real loop and fleet on the fakes of tests/support/fakes.py (no sockets)."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hunyuan_serve.config import GatewayConfig
from hunyuan_serve.gateway.command import format_inventory
from hunyuan_serve.gateway.hosts import HostListing, ListedReplica, parse_listing
from hunyuan_serve.gateway.inventory import parse_inventory
from hunyuan_serve.gateway.loop import Gateway
from tests.support.fakes import FakeClock, FakeDiscovery, FakeNginx, FakeProber

A, B = "http://10.77.0.2:8080", "http://10.77.0.3:8080"


def listing(
    *replicas: tuple[str, str, bool], config: int = 1, model: str = "tiny-mt", tls: bool = False
) -> HostListing:
    return HostListing(model, "hunyuan-mt", config, tuple(ListedReplica(*r) for r in replicas), tls)


class Harness:
    def __init__(self, tmp_path: Path, inventory: dict[str, Any] | None = None, **gateway: Any) -> None:
        settings = {"host_down_after": 3, "unhealthy_threshold": 3, "readmit_backoff_s": 1.0, **gateway}
        data = {"hosts": [{"name": "a", "url": A}, {"name": "b", "url": B}], "gateway": settings}
        self.inventory = parse_inventory({**data, **(inventory or {})}, "test.yaml", tmp_path)
        self.a, self.b = (h.url for h in self.inventory.hosts)
        self.clock, self.discovery = FakeClock(instant=True), FakeDiscovery()
        self.prober = FakeProber(self.clock)
        self.nginx = FakeNginx(self.clock, tmp_path / "nginx")
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.discovery.answers = {
            self.a: listing(("replica-0", "10.77.0.2:8101", True)),
            self.b: listing(("replica-0", "10.77.0.3:8101", True)),
        }
        self.gw = Gateway(
            self.inventory,
            discovery=self.discovery,
            prober=self.prober,
            nginx=self.nginx,
            clock=self.clock,
            emit=lambda name, **fields: self.events.append((name, fields)),
            run_dir=tmp_path,
            web_root=tmp_path,
            worker_user=None,
            signals=(),
        )

    async def rounds(self, count: int) -> None:
        """count rounds of the loop: a probe interval passes before each, Nginx synced after each."""
        for _ in range(count):
            self.clock.t += self.inventory.gateway.probe_interval_s
            await self.gw.step()
            await self.gw.sync()

    async def boot(self) -> None:
        await self.gw.step()
        await self.gw.start_nginx()
        await self.rounds(2)

    def named(self, event: str) -> list[dict[str, Any]]:
        return [fields for name, fields in self.events if name == event]


async def test_boot_admits_every_replica_of_every_host(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    await h.boot()
    assert h.nginx.upstream() == {"10.77.0.2:8101": True, "10.77.0.3:8101": True}
    assert [e["replica"] for e in h.named("admitted")] == ["a/replica-0", "b/replica-0"]
    assert [e["host"] for e in h.named("host_up")] == ["a", "b"]
    assert (
        '"hosts":{"a":{"state":"up","ready":1,"replicas":1,"model":"tiny-mt"},'
        '"b":{"state":"up","ready":1,"replicas":1,"model":"tiny-mt"}}' in h.nginx.configs[-1]
    )
    assert "least_conn;" in h.nginx.configs[-1] and "proxy_next_upstream error timeout" in h.nginx.configs[-1]


async def test_hosts_serving_different_models_are_reported_once_per_mix(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.discovery.answers[B] = listing(("replica-0", "10.77.0.3:8101", True), model="other-mt")
    await h.boot()
    assert h.named("models_differ") == [{"models": {"a": "tiny-mt", "b": "other-mt"}, "routed": "all"}]
    assert all(h.nginx.upstream().values())  # unset gateway.model: a mix is reported, not refused
    await h.rounds(4)
    assert len(h.named("models_differ")) == 1
    h.discovery.answers[B] = listing(("replica-0", "10.77.0.3:8101", True))  # b's reload to a's model
    await h.rounds(4)
    h.discovery.answers[A] = listing(("replica-0", "10.77.0.2:8101", True), model="third-mt")
    await h.rounds(4)
    assert [e["models"] for e in h.named("models_differ")][-1] == {"a": "third-mt", "b": "tiny-mt"}


async def test_gateway_model_routes_only_the_hosts_serving_it(tmp_path: Path) -> None:
    h = Harness(tmp_path, model="tiny-mt")
    h.discovery.answers[B] = listing(("replica-0", "10.77.0.3:8101", True), model="other-mt")
    await h.boot()
    assert h.nginx.upstream() == {"10.77.0.2:8101": True, "10.77.0.3:8101": False}
    assert h.named("models_differ")[0]["routed"] == "tiny-mt"
    view = h.gw.fleet.hosts["b"]
    assert h.gw.fleet.replica_state(view, view.replicas["10.77.0.3:8101"]) == "other_model"
    assert '"model":"tiny-mt"' in h.nginx.configs[-1]
    h.discovery.answers[B] = listing(("replica-0", "10.77.0.3:8101", True))
    await h.rounds(4)
    assert all(h.nginx.upstream().values())
    assert [e["replica"] for e in h.named("admitted")][-1] == "b/replica-0"


async def test_host_down_evicts_all_its_replicas_and_back_readmits_them(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.discovery.answers[A] = listing(
        ("replica-0", "10.77.0.2:8101", True), ("replica-1", "10.77.0.2:8102", True)
    )
    await h.boot()
    assert all(h.nginx.upstream().values()) and len(h.nginx.upstream()) == 3
    h.discovery.answers[A] = "timeout"
    # Discovery runs every second, rounds every half second: two failed polls keep the host.
    await h.rounds(4)
    assert h.named("host_down") == [] and all(h.nginx.upstream().values())
    await h.rounds(2)
    assert [e["host"] for e in h.named("host_down")] == ["a"]
    assert h.nginx.upstream() == {"10.77.0.2:8101": False, "10.77.0.2:8102": False, "10.77.0.3:8101": True}
    assert sorted(e["replica"] for e in h.named("evicted")) == ["a/replica-0", "a/replica-1"]
    reasons = {r.health.reason for r in h.gw.fleet.hosts["a"].replicas.values()}
    assert reasons == {"host down: 3 failed poll(s): timeout"}
    probed = len(h.prober.probed)
    await h.rounds(6)  # while the host is down its replicas are not probed, nor readmitted
    assert all(addr.startswith("10.77.0.3") for addr in h.prober.probed[probed:])
    assert h.nginx.upstream()["10.77.0.2:8101"] is False
    h.discovery.answers[A] = listing(
        ("replica-0", "10.77.0.2:8101", True), ("replica-1", "10.77.0.2:8102", True)
    )
    await h.rounds(4)
    assert [e["host"] for e in h.named("host_up")] == ["a", "b", "a"]
    assert all(h.nginx.upstream().values()) and len(h.nginx.upstream()) == 3
    assert [e["replica"] for e in h.named("admitted")][-2:] == ["a/replica-0", "a/replica-1"]


async def test_the_state_file_says_what_nginx_routes_as_soon_as_a_reload_is_done(tmp_path: Path) -> None:
    h = Harness(tmp_path, unhealthy_threshold=1)
    await h.boot()
    h.prober.failing.add("10.77.0.2:8101")
    h.clock.t += h.inventory.gateway.probe_interval_s
    await h.gw.step()  # the probe fails: the replica is out of the view, Nginx not reloaded yet
    assert _routed_ready(tmp_path) == 2
    await h.gw.sync()
    assert h.named("evicted") and _routed_ready(tmp_path) == 1


def _routed_ready(run_dir: Path) -> int:
    return int(json.loads((run_dir / "gateway.json").read_text())["nginx"]["ready"])


async def test_one_replica_that_stops_answering_is_evicted_and_readmitted(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    await h.boot()
    h.prober.failing.add("10.77.0.2:8101")
    await h.rounds(2)
    assert h.nginx.upstream()["10.77.0.2:8101"] is True  # under the threshold: still routed
    await h.rounds(1)
    assert h.nginx.upstream() == {"10.77.0.2:8101": False, "10.77.0.3:8101": True}
    assert h.named("host_down") == []
    assert h.gw.fleet.hosts["a"].replicas["10.77.0.2:8101"].health.reason == (
        "evicted after 3 failed probe(s): ConnectError"
    )
    await h.rounds(6)  # failing probes after the backoff keep it out
    assert h.nginx.upstream()["10.77.0.2:8101"] is False
    h.prober.failing.clear()
    await h.rounds(2)
    assert h.nginx.upstream() == {"10.77.0.2:8101": True, "10.77.0.3:8101": True}
    assert [e["replica"] for e in h.named("evicted")] == ["a/replica-0"]


async def test_a_reload_on_a_host_that_moves_a_replica_is_followed(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    await h.boot()
    # The host's rolling reload: a new replica beside the old one, then the old one drained.
    h.discovery.answers[A] = listing(
        ("replica-0", "10.77.0.2:8101", False), ("replica-0", "10.77.0.2:8111", True), config=2
    )
    await h.rounds(2)  # the next poll
    assert h.nginx.upstream()["10.77.0.2:8101"] is False  # the host says not ready: out at once
    assert h.nginx.upstream()["10.77.0.2:8111"] is False  # not probed yet
    await h.rounds(1)
    assert h.nginx.upstream()["10.77.0.2:8111"] is True
    h.discovery.answers[A] = listing(("replica-0", "10.77.0.2:8111", True), config=3)
    await h.rounds(2)
    assert h.nginx.upstream() == {"10.77.0.2:8111": True, "10.77.0.3:8101": True}
    assert [e["addr"] for e in h.named("replica_gone")] == ["10.77.0.2:8101"]
    assert [e["addr"] for e in h.named("replica_discovered")][-1] == "10.77.0.2:8111"


async def test_no_host_answers_yet_gives_an_upstream_nginx_accepts_and_a_503_health(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.discovery.answers = {A: "ConnectError", B: "HTTP 403: refused"}
    await h.gw.step()
    await h.gw.start_nginx()
    text = h.nginx.configs[-1]
    assert "server 127.0.0.1:9 down;" in text and "return 503" in text
    await h.rounds(6)
    assert sorted(e["host"] for e in h.named("host_down")) == ["a", "b"]
    assert "failed poll(s): HTTP 403: refused" in h.gw.fleet.hosts["b"].reason


async def test_a_refused_reload_keeps_the_last_config_and_is_retried(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    await h.gw.step()
    await h.gw.start_nginx()
    h.nginx.reject = "test"
    await h.rounds(2)
    assert h.named("nginx_reload_failed") and len(h.nginx.configs) == 1
    assert len(h.nginx.reloads) == 1  # the next try waits nginx.reload_retry_s (1 s), two rounds here
    h.nginx.reject = None
    await h.rounds(3)
    assert all(h.nginx.upstream().values()) and len(h.nginx.upstream()) == 2


# A host whose TLS does not match its url, or whose replicas would get the peer secret in plain HTTP off
# loopback; each host's url passes the inventory's own checks at load, so only its listing shows it.
SECRET_PLAIN = {
    "peer_secret_file": "peer.secret",  # beside the inventory: in tmp_path
    "hosts": [{"name": "a", "url": "http://127.0.0.1:8080"}, {"name": "b", "url": "http://127.0.0.2:8080"}],
}
HTTPS = {
    "tls_ca": "/etc/hs/ca.crt",
    "tls_name": "replicas.hs.internal",
    "hosts": [{"name": "a", "url": "https://10.77.0.2:8443"}, {"name": "b", "url": "https://10.77.0.3:8443"}],
}


@pytest.mark.parametrize(
    ("inventory", "tls", "why"),
    [
        (
            SECRET_PLAIN,
            False,
            "replica replica-0 at 10.77.0.3:8101 is not loopback and the link is plain HTTP",
        ),
        (HTTPS, True, "its url is https but its replicas listen in plain HTTP"),
    ],
)
async def test_a_host_ready_after_the_start_is_not_routed_when_its_listing_breaks_the_tls_rules(
    tmp_path: Path, inventory: dict[str, Any], tls: bool, why: str
) -> None:
    (tmp_path / "peer.secret").write_text("s" * 32)
    h = Harness(tmp_path, inventory)
    a_addr = "127.0.0.1:8101" if not tls else "10.77.0.2:8101"
    h.discovery.answers = {h.a: listing(("replica-0", a_addr, True), tls=tls), h.b: "ConnectError"}
    await h.boot()  # b does not answer yet: the start's own check (start_problems) never saw it
    h.discovery.answers[h.b] = listing(("replica-0", "10.77.0.3:8101", True))  # plain HTTP
    await h.rounds(6)
    assert h.nginx.upstream() == {a_addr: True}  # a is routed; nothing of b is
    assert [e["replica"] for e in h.named("admitted")] == ["a/replica-0"]
    assert [e["host"] for e in h.named("host_down")] == ["b"] and why in h.named("host_down")[0]["reason"]
    state = json.loads((tmp_path / "gateway.json").read_text())
    b = state["hosts"][1]
    assert (b["name"], b["state"], b["replicas"]) == ("b", "down", [])
    assert why in b["reason"] and why in format_inventory(state)  # what `gateway status` prints


async def test_sighup_reloads_nginx_on_the_same_routing_and_the_loop_goes_on(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    task = asyncio.create_task(h.gw.run())
    await _until(lambda: bool(h.named("nginx_started")))
    loads = len(h.nginx.reloads)
    h.gw.request_stop(signal.SIGHUP)
    await _until(lambda: bool(h.named("reload_done")))
    assert h.named("reload_done") == [{"reload": 1, "tls": None}]  # TLS off: nothing to check
    assert len(h.nginx.reloads) == loads + 1 and not task.done()
    h.gw.request_stop()
    assert await asyncio.wait_for(task, 5) == 0


async def _until(condition: Callable[[], bool], turns: int = 10_000) -> None:
    """Let the loop run (the fake clock sleeps at once) until condition holds, a bounded number of turns."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    pytest.fail(f"not reached within {turns} turns of the event loop")


async def test_run_stops_on_a_signal_and_stops_nginx(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    task = asyncio.create_task(h.gw.run())
    for _ in range(50):
        await asyncio.sleep(0)
    h.gw.request_stop()
    assert await asyncio.wait_for(task, 5) == 0
    assert h.nginx.stopped and h.discovery.closed
    assert [name for name, _ in h.events][-3:] == ["stopping", "nginx_stopped", "stopped"]
    assert (tmp_path / "gateway.json").exists()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({}, "no replicas list"),
        ({"replicas": [{"name": "r", "addr": "10.0.0.1", "ready": True}]}, "is not HOST:PORT"),
        ({"replicas": [{"name": "r", "addr": "a:1; evil", "ready": True}]}, "is not HOST:PORT"),
        ({"replicas": [{"name": "r", "addr": "h:70000", "ready": True}]}, "is not HOST:PORT"),
        ({"replicas": [{"name": "r x", "addr": "h:1", "ready": True}]}, "not a plain name"),
        ({"replicas": [{"name": "r", "addr": "0.0.0.0:8101", "ready": True}]}, "is a wildcard"),
        ({"replicas": [{"name": "r", "addr": "h:1", "ready": "yes"}]}, "ready is not true"),
    ],
)
def test_a_bad_listing_is_refused_naming_the_problem(data: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_listing(data)


def test_a_listing_as_a_host_renders_it() -> None:
    got = parse_listing(
        {
            "model": "m",
            "family": None,
            "config": 4,
            "replicas": [{"name": "replica-0", "addr": "[::1]:81", "ready": False}],
        }
    )
    assert got == HostListing("m", None, 4, (ListedReplica("replica-0", "[::1]:81", False),))


def test_defaults_come_from_the_config_model() -> None:
    assert parse_inventory({"hosts": [{"name": "a", "url": A}]}, "x", Path(".")).gateway == GatewayConfig()

"""The gateway's view of its hosts and their replicas: listings and probes in, routing out; no I/O."""

# Each replica runs through the supervisor's own health machine (run/health.py). The gateway owns
# no process, so where the machine says Kill it counts the replica as gone at once (evicted), and its
# "restart" is the readmission probe after a backoff. A host that cannot be polled host_down_after times
# in a row is down: every replica of it is evicted together, and probed again once the host answers.

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from hunyuan_serve.config import DEFAULT_POOL, GatewayConfig, SupervisorConfig
from hunyuan_serve.edge.layout import GatewayFront, model_pool
from hunyuan_serve.edge.routing import Routing, UpstreamServer
from hunyuan_serve.gateway.inventory import HostEntry
from hunyuan_serve.run import health
from hunyuan_serve.run.health import Health, Kill, State

# What a host lists goes into the gateway's Nginx config: only plain names and HOST:PORT addresses.
_ADDR = re.compile(r"^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$")
_REPLICA_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


@dataclass(frozen=True)
class ListedReplica:
    name: str
    addr: str
    ready: bool  # what the host's own routing says (false: starting, evicted, draining there)
    model: str = ""  # what it serves on a host of several pools (its pool's); "": the host's model


@dataclass(frozen=True)
class HostListing:
    """A host's answer to GET /_hs/replicas."""

    model: str
    family: str | None
    config: int
    replicas: tuple[ListedReplica, ...]
    tls: bool = False  # its replicas listen with TLS (the host's replica.tls_cert)


def parse_listing(data: Any) -> HostListing:
    """A host's /_hs/replicas JSON, checked; ValueError says what is wrong with it."""
    if not isinstance(data, dict) or not isinstance(data.get("replicas"), list):
        raise ValueError("not a replica listing (no replicas list)")
    replicas = []
    for item in data["replicas"]:
        if not isinstance(item, dict):
            raise ValueError("a replica entry is not an object")
        name, addr, ready = item.get("name"), item.get("addr"), item.get("ready")
        if not isinstance(addr, str) or not _ADDR.match(addr) or int(addr.rsplit(":", 1)[1]) > 65535:
            raise ValueError(f"replica addr {addr!r} is not HOST:PORT")
        if addr.rsplit(":", 1)[0] in ("0.0.0.0", "[::]"):
            raise ValueError(
                f"replica addr {addr} is a wildcard: give the host's up its private replica.host"
            )
        if not isinstance(name, str) or not _REPLICA_NAME.match(name):
            raise ValueError(f"replica name {name!r} is not a plain name")
        if not isinstance(ready, bool):
            raise ValueError(f"replica {name}: ready is not true or false")
        replicas.append(ListedReplica(name, addr, ready, _model_of(item, data)))
    model, family, config = data.get("model"), data.get("family"), data.get("config")
    return HostListing(
        model if isinstance(model, str) else "",
        family if isinstance(family, str) else None,
        config if isinstance(config, int) else 0,
        tuple(replicas),
        data.get("tls") is True,
    )


def _model_of(item: dict[str, Any], data: dict[str, Any]) -> str:
    """A replica's model on a host of several pools (its listing maps `pools`: name -> served, and each
    replica names its pool); "" elsewhere: the host's model."""
    pools, pool = data.get("pools"), item.get("pool")
    if isinstance(pools, dict) and isinstance(pool, str) and isinstance(pools.get(pool), str):
        return str(pools[pool])
    return ""


def health_rules(gw: GatewayConfig) -> SupervisorConfig:
    """The supervisor's health machine with the gateway's thresholds. A remote replica has no startup
    deadline (until it answers it is just not routed) and is never given up on: its own host's
    supervisor owns its crash loop."""
    return SupervisorConfig(
        unhealthy_threshold=gw.unhealthy_threshold,
        startup_timeout_s=math.inf,
        restart_backoff_base_s=gw.readmit_backoff_s,
        restart_backoff_max_s=gw.readmit_backoff_max_s,
        restart_backoff_jitter=0.0,
        crash_loop_budget=sys.maxsize,
    )


@dataclass
class RemoteReplica:
    name: str
    addr: str
    host_ready: bool
    health: Health
    last_probe_ms: float | None = None
    model: str = ""


@dataclass
class HostView:
    entry: HostEntry
    state: str = "unknown"  # unknown (not polled yet), up, down
    failures: int = 0  # polls failed in a row
    reason: str = "not polled yet"
    since: float = 0.0
    listing: HostListing | None = None
    replicas: dict[str, RemoteReplica] = field(default_factory=dict)  # by addr, in listing order

    @property
    def up(self) -> bool:
        return self.state == "up"


Event = tuple[str, dict[str, Any]]


class Fleet:
    """Every host and replica the gateway knows; each method returns the events it caused."""

    def __init__(self, hosts: tuple[HostEntry, ...], gw: GatewayConfig, now: float) -> None:
        self.gw = gw
        self.rules = health_rules(gw)
        self.hosts = {h.name: HostView(h, since=now) for h in hosts}
        self.mix: dict[str, str] = {}  # host -> model, last reported while the hosts disagreed

    # -- discovery ---------------------------------------------------------------------------

    def listed(self, host: str, listing: HostListing, now: float) -> list[Event]:
        """The host answered its listing: it is up; replicas new to it are probed, gone ones dropped."""
        view = self.hosts[host]
        events: list[Event] = []
        if not view.up:
            events.append(("host_up", {"host": host, "was": view.state, "replicas": len(listing.replicas)}))
            view.state, view.since = "up", now
        view.failures, view.reason, view.listing = 0, "listed", listing
        old = view.replicas
        view.replicas = {}
        for item in listing.replicas:
            replica = old.get(item.addr) or RemoteReplica(
                item.name, item.addr, item.ready, health.initial(now)
            )
            if item.addr not in old:
                events.append(("replica_discovered", {"host": host, "replica": item.name, "addr": item.addr}))
            replica.name, replica.host_ready = item.name, item.ready
            replica.model = item.model or listing.model
            view.replicas[item.addr] = replica
        for addr, gone in old.items():
            if addr not in view.replicas:
                events.append(("replica_gone", {"host": host, "replica": gone.name, "addr": addr}))
        return events + self._model_mix() + self._step_host(view, health.Tick(now))

    def models(self) -> dict[str, str]:
        """host -> the model it serves, for each host that is up and listed one."""
        return {
            name: v.listing.model for name, v in self.hosts.items() if v.up and v.listing and v.listing.model
        }

    def _model_mix(self) -> list[Event]:
        """models_differ once when the hosts up start to serve different models (or another mix)."""
        models = self.models()
        if len(set(models.values())) < 2:
            self.mix = {}
            return []
        if models == self.mix:
            return []
        self.mix = models
        return [("models_differ", {"models": models, "routed": self.gw.model or "all"})]

    def unlisted(self, host: str, detail: str, now: float) -> list[Event]:
        """A poll of the host failed; the host_down_after-th in a row takes every replica of it out."""
        view = self.hosts[host]
        view.failures += 1
        view.reason = f"{view.failures} failed poll(s): {detail}"
        if view.failures < self.gw.host_down_after or view.state == "down":
            return []
        view.state, view.since = "down", now
        events: list[Event] = [("host_down", {"host": host, "reason": view.reason})]
        return events + self._step_host(view, health.Exited(now, None))

    # -- probes and time ---------------------------------------------------------------------

    def to_probe(self) -> list[tuple[str, str]]:
        """(host, addr) of each replica to probe now: on a host that is up, in a probed state."""
        return [
            (view.entry.name, addr)
            for view in self.hosts.values()
            if view.up
            for addr, r in view.replicas.items()
            if r.health.state.probed
        ]

    def probed(
        self, host: str, addr: str, ok: bool, detail: str, latency_ms: float, now: float
    ) -> list[Event]:
        view = self.hosts[host]
        replica = view.replicas.get(addr)
        if replica is None:  # dropped by a listing while the probe was out
            return []
        replica.last_probe_ms = latency_ms
        return self._step(view, replica, health.Probe(now, ok, detail))

    def tick(self, now: float) -> list[Event]:
        return [e for view in self.hosts.values() for e in self._step_host(view, health.Tick(now))]

    def _step_host(self, view: HostView, obs: health.Observation) -> list[Event]:
        return [e for r in list(view.replicas.values()) for e in self._step(view, r, obs)]

    def _step(self, view: HostView, replica: RemoteReplica, obs: health.Observation) -> list[Event]:
        before = replica.health
        after, actions = health.step(before, obs, self.rules)
        if any(isinstance(a, Kill) for a in actions):
            # No process to kill here: out of the routing now, and probed again after the backoff.
            after = replace(
                health.step(after, health.Exited(obs.now, None), self.rules)[0], reason=after.reason
            )
        elif isinstance(obs, health.Exited) and after.state is not before.state:
            after = replace(after, reason=f"host down: {view.reason}")
        elif after.state is State.STARTING and before.state is not State.STARTING:
            after = replace(after, reason="probing: admitted once /health answers 200")
        replica.health = after
        if after.state is before.state:
            return []
        fields = {"host": view.entry.name, "replica": replica.name, "addr": replica.addr}
        return [
            (
                "transition",
                {**fields, "from": before.state.value, "to": after.state.value, "reason": after.reason},
            )
        ]

    # -- what the gateway's Nginx routes to ----------------------------------------------------

    def serves_the_model(self, view: HostView) -> bool:
        return self.gw.model is None or (view.listing is not None and view.listing.model == self.gw.model)

    def routed(self, view: HostView, replica: RemoteReplica) -> bool:
        return (
            view.up and self.serves_the_model(view) and replica.host_ready and replica.health.state.routable
        )

    def served(self) -> dict[str, str]:
        """Each model routed (pool key -> model), in inventory and listing order; with gateway.model only
        that one. Several: the front routes each request by its model to the replicas serving it."""
        models: dict[str, str] = {}
        for view in self.hosts.values():
            if view.up and self.serves_the_model(view):
                for r in view.replicas.values():
                    if r.model and (self.gw.model is None or r.model == self.gw.model):
                        models.setdefault(model_pool(r.model), r.model)
        return models

    def routing(self) -> Routing:
        """Every replica of every host, in inventory and listing order; those not routable are down; each
        in the pool of its model (a replica of a model not routed is down in the first pool)."""
        served = self.served()
        first = next(iter(served), DEFAULT_POOL)
        servers = []
        for view in self.hosts.values():
            for addr, r in view.replicas.items():
                key = model_pool(r.model) if r.model else first  # a host naming no model: the first's
                pool = key if key in served else first
                down = not self.routed(view, r) or pool != key
                servers.append(UpstreamServer(addr, down, f"{view.entry.name}/{r.name}", pool))
        return Routing(tuple(servers))

    def front(self) -> GatewayFront:
        """The model the hosts serve (the first host that listed one) and each host's counts."""
        listings = [
            v.listing
            for v in self.hosts.values()
            if v.up and v.listing is not None and self.serves_the_model(v)
        ]
        model = next((x.model for x in listings if x.model), self.gw.model or "")
        family = next((x.family for x in listings if x.family), None)
        hosts = {
            name: {
                "state": view.state,
                "ready": sum(self.routed(view, r) for r in view.replicas.values()),
                "replicas": len(view.replicas),
                "model": view.listing.model if view.listing else None,
            }
            for name, view in self.hosts.items()
        }
        return GatewayFront(model, family, hosts, self.served())

    def replica_state(self, view: HostView, replica: RemoteReplica) -> str:
        """What `gateway status` says of a replica, from the gateway's point of view."""
        state = replica.health.state
        if not view.up:
            return "host_down"
        if not self.serves_the_model(view):
            return "other_model"
        if not replica.host_ready:
            return "not_ready_on_host"
        if state.routable:
            return state.value
        return "probing" if state is State.STARTING else "evicted"

"""TLS from the gateway to its hosts: the client context, what a host's listing must say, the start check."""

from __future__ import annotations

import asyncio
import ssl

from hunyuan_serve.auth import is_loopback
from hunyuan_serve.config import ConfigError
from hunyuan_serve.edge.upstream_tls import UpstreamTls
from hunyuan_serve.gateway.discovery import Discovery, DiscoveryError
from hunyuan_serve.gateway.hosts import HostListing
from hunyuan_serve.gateway.inventory import HostEntry, Inventory


def uses_tls(inv: Inventory) -> bool:
    """Every host is https (the inventory allows all or none)."""
    return inv.hosts[0].tls


def client_context(inv: Inventory) -> ssl.SSLContext | None:
    """What discovery and the probes verify the hosts with (tls_ca) and show them (tls_cert); None for
    plain hosts. An unreadable or bad file is a ConfigError naming it."""
    if not uses_tls(inv):
        return None
    path = inv.tls_ca
    try:
        context = ssl.create_default_context(cafile=inv.tls_ca)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if inv.tls_cert and inv.tls_key:
            path = f"{inv.tls_cert} (with {inv.tls_key})"
            context.load_cert_chain(inv.tls_cert, inv.tls_key)
    except (OSError, ssl.SSLError) as err:
        raise ConfigError(f"inventory: cannot use {path}: {getattr(err, 'strerror', None) or err}") from None
    return context


def upstream_tls(inv: Inventory) -> UpstreamTls | None:
    """The gateway's Nginx to the hosts' replicas: verified for tls_name, with the client certificate."""
    if not uses_tls(inv):
        return None
    return UpstreamTls(inv.tls_ca, inv.tls_name, inv.tls_cert, inv.tls_key)


def listing_problem(entry: HostEntry, listing: HostListing, secret: bool) -> str | None:
    """Why the gateway must not route to the replicas a host lists (None: it may): an https url means
    TLS on every hop, and over plain HTTP the peer secret goes to loopback only unless allow_plain."""
    if entry.tls and not listing.tls:
        return (
            "its url is https but its replicas listen in plain HTTP (its listing does not say tls): set "
            "replica.tls_cert and replica.tls_key on the host (docs/tls-hosts.md)"
        )
    if not entry.tls and listing.tls:
        return "its replicas listen with TLS: give it an https:// url, with tls_ca and tls_name"
    if entry.tls or not secret or entry.allow_plain:
        return None
    for replica in listing.replicas:
        address = replica.addr.rsplit(":", 1)[0]
        if not is_loopback(address):
            return (
                f"replica {replica.name} at {replica.addr} is not loopback and the link is plain HTTP: the "
                "peer secret would cross the network in clear (TLS: docs/tls-hosts.md; or allow_plain)"
            )
    return None


async def start_problems(inv: Inventory, discovery: Discovery) -> list[str]:
    """Each host that answers now but must not be used, with why: a TLS handshake that fails (a plain
    HTTP host behind an https url, a certificate tls_ca did not sign) or a listing the rules refuse. A
    host that does not answer is no problem: the gateway polls it until it does."""
    results = await asyncio.gather(*(discovery.fetch(h.url) for h in inv.hosts), return_exceptions=True)
    problems = []
    for host, result in zip(inv.hosts, results, strict=True):
        problem = None
        if isinstance(result, DiscoveryError) and result.tls:
            problem = str(result)
        elif isinstance(result, HostListing):
            problem = listing_problem(host, result, inv.peer_secret_file is not None)
        elif isinstance(result, BaseException) and not isinstance(result, DiscoveryError):
            raise result
        if problem:
            problems.append(f"host {host.name} ({host.url}): {problem}")
    return problems

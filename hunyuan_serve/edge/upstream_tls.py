"""How an Nginx reaches replicas that speak TLS: verified (a gateway's hosts) or this host's own."""

from __future__ import annotations

from dataclasses import dataclass

from hunyuan_serve.config import ServeConfig


@dataclass(frozen=True)
class UpstreamTls:
    """The proxy_ssl_* settings of every upstream of one Nginx (they are per location, not per server,
    so one Nginx reaches all its replicas one way)."""

    trusted: str | None = None  # CA file verifying the replicas' certificates; None: not verified
    name: str | None = None  # the name each certificate must carry (proxy_ssl_name, sent as SNI)
    cert: str | None = None  # client certificate for mutual TLS, and its key
    key: str | None = None


def host_upstream_tls(cfg: ServeConfig) -> UpstreamTls | None:
    """A host's Nginx to its own replicas: TLS when they listen with it (replica.tls_cert), unverified
    and without a client certificate, since the hop never leaves the machine (replica/tls.py)."""
    return UpstreamTls() if cfg.replica.tls_cert else None


def replicas_speak_tls(cfg: ServeConfig) -> bool:
    """What a host's replica listing tells a gateway: its replicas' port is TLS."""
    return cfg.replica.tls_cert is not None

"""The replica's TLS listener: Uvicorn's ssl settings, and mutual TLS for every caller off this host."""

# With replica.tls_client_ca a caller from another machine must show a client certificate that CA
# signed; this host's own Nginx and supervisor reach the replica on an address of this host (the
# kernel never takes a packet in from the wire with a local source address) and show none. So the
# handshake asks for a certificate without requiring one (CERT_OPTIONAL: one that is shown must
# verify), and a connection from elsewhere that showed none gets a 403 and is closed before any
# request of it is read.

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import ssl
from typing import Any

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.edge.dialects import NATIVE
from hunyuan_serve.replica.onewrite import OneWriteProtocol

CLIENT_CERT_REQUIRED = "client_certificate_required"
_MESSAGE = "this replica takes callers from other machines only with a client certificate its CA signed"


def listener(cfg: ReplicaConfig) -> dict[str, Any]:
    """uvicorn.Config's protocol and ssl_* arguments: every answer in one write (replica/onewrite.py), so
    a replica dying mid-answer sends nothing; TLS with replica.tls_cert; mutual TLS with tls_client_ca."""
    return {"http": protocol_class(cfg), **uvicorn_tls(cfg)}


def uvicorn_tls(cfg: ReplicaConfig) -> dict[str, Any]:
    """uvicorn.Config's ssl_* arguments for the replica section (none without replica.tls_cert)."""
    if not cfg.tls_cert:
        return {}
    settings: dict[str, Any] = {"ssl_certfile": cfg.tls_cert, "ssl_keyfile": cfg.tls_key}
    if cfg.tls_client_ca:
        settings.update(ssl_ca_certs=cfg.tls_client_ca, ssl_cert_reqs=ssl.CERT_OPTIONAL)
    return settings


def protocol_class(cfg: ReplicaConfig) -> type[OneWriteProtocol]:
    """The HTTP protocol of the replica's listener: with mutual TLS, one that refuses foreign callers
    without a client certificate."""
    return ClientCertProtocol if cfg.tls_client_ca else OneWriteProtocol


def from_this_host(peer: str, local: str) -> bool:
    """A caller on this machine: loopback, or the very address it called (a local route's source)."""
    try:
        return ipaddress.ip_address(peer).is_loopback or peer == local
    except ValueError:
        return False


def admitted(transport: asyncio.BaseTransport) -> bool:
    """The connection showed a verified client certificate, or comes from this host."""
    tls = transport.get_extra_info("ssl_object")
    if tls is not None and tls.getpeercert():
        return True
    peer, local = transport.get_extra_info("peername"), transport.get_extra_info("sockname")
    return bool(peer and local) and from_this_host(str(peer[0]), str(local[0]))


def refusal() -> bytes:
    """The whole 403 answer written to a refused connection, in the native API's error shape."""
    body = json.dumps(NATIVE.error(CLIENT_CERT_REQUIRED, _MESSAGE, 403)).encode()
    head = (
        "HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class ClientCertProtocol(OneWriteProtocol):
    """OneWriteProtocol that answers a foreign caller without a client certificate 403 and hangs up."""

    refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if admitted(transport):
            return
        self.refused = True
        peer = transport.get_extra_info("peername")
        logging.getLogger(__name__).info(
            json.dumps({"event": "tls_client_refused", "peer": str(peer[0]) if peer else None})
        )
        transport.write(refusal())
        transport.close()

    def data_received(self, data: bytes) -> None:
        if not self.refused:  # a refused caller's request is never parsed, let alone run
            super().data_received(data)

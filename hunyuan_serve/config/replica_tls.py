"""The replica's TLS listener: its certificate and key, and the CA whose client certificates it accepts."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator

from hunyuan_serve.config.base import Section


class ReplicaTlsFields(Section):
    """TLS on the replica's one port (replica.host:port), for a gateway on another machine: composed into
    the replica section. Host-wide: set them at the top level, not per pool (the host's Nginx reaches
    every replica of it one way, and its listing tells the gateway so)."""

    tls_cert: str | None = Field(
        None,
        description="PEM certificate the replica serves HTTPS with (leaf first, then its chain); its names "
        "cover the gateway's tls_name (docs/tls-hosts.md); needs tls_key.",
    )
    tls_key: str | None = Field(None, description="PEM private key of replica.tls_cert, unencrypted.")
    tls_client_ca: str | None = Field(
        None,
        description="Mutual TLS: accept only callers with a client certificate this CA signed (the "
        "gateway's); this host's own processes (its Nginx, its supervisor) need none.",
    )

    @field_validator("tls_cert", "tls_key", "tls_client_ca")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        # Replicas run elsewhere than `up`'s working directory; they get the same file.
        return str(Path(value).expanduser().absolute()) if value else None

    @model_validator(mode="after")
    def _tls_pair(self) -> ReplicaTlsFields:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("replica.tls_cert and replica.tls_key are set together (TLS needs both)")
        if self.tls_client_ca and not self.tls_cert:
            raise ValueError("replica.tls_client_ca needs replica.tls_cert and tls_key (mutual TLS is TLS)")
        return self

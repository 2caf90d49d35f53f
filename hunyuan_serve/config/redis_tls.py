"""The Redis link's TLS (rediss://): the CA that verifies Redis, and the client's own certificate."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator

from hunyuan_serve.config.base import Section


class RedisTlsFields(Section):
    """TLS options of the one Redis link every Redis client of a replica opens (the cache, the per-key
    store of glossaries and usage counts, the document jobs): composed into the replica section."""

    cache_redis_tls_ca: str | None = Field(
        None,
        description="CA file (PEM) that verifies Redis's certificate on a rediss:// cache_redis_url "
        "(unset: the system's CAs).",
    )
    cache_redis_tls_cert: str | None = Field(
        None, description="Client certificate (PEM) sent to Redis over rediss:// (Redis's tls-auth-clients)."
    )
    cache_redis_tls_key: str | None = Field(
        None, description="Private key (PEM) of cache_redis_tls_cert; only its owner may read it."
    )

    @field_validator("cache_redis_tls_ca", "cache_redis_tls_cert", "cache_redis_tls_key")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        # Replicas run elsewhere than `up`'s working directory; they get the same file.
        return str(Path(value).expanduser().absolute()) if value else None

    @model_validator(mode="after")
    def _tls_needs_rediss(self) -> RedisTlsFields:
        named = [
            name
            for name in ("cache_redis_tls_ca", "cache_redis_tls_cert", "cache_redis_tls_key")
            if getattr(self, name)
        ]
        url = getattr(self, "cache_redis_url", None) or ""  # the replica section declares it
        if named and not url.startswith("rediss://"):
            raise ValueError(
                f"{', '.join(named)} set, but cache_redis_url is not a rediss:// URL: the TLS options "
                "apply to rediss:// only (e.g. rediss://10.0.0.9:6380/0)"
            )
        if bool(self.cache_redis_tls_cert) != bool(self.cache_redis_tls_key):
            raise ValueError("cache_redis_tls_cert and cache_redis_tls_key go together: set both or neither")
        return self

"""The peer secret of a multi-host deployment: its file, the header it travels in, the comparison."""

from __future__ import annotations

import hashlib
import hmac
import re
from pathlib import Path

from hunyuan_serve.config import AuthConfig, ConfigError

# Multi-host: the header carrying the shared secret (auth.peer_secret_file) from the gateway to a host.
PEER_HEADER = "X-Hunyuan-Peer"

# It travels in a header and sits in Nginx's config as a quoted string: nothing that would need escaping.
_PEER_SECRET = re.compile(r"^[A-Za-z0-9._~+/=-]{16,}$")


def load_peer_secret(path: str) -> str:
    """The secret of a peer_secret_file: its text without the whitespace (newline) around it."""
    try:
        secret = Path(path).read_text(encoding="utf-8").strip()
    except OSError as err:
        raise ConfigError(f"auth.peer_secret_file: cannot read {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"auth.peer_secret_file: {path} is not UTF-8 text") from None
    if not secret:
        raise ConfigError(f"auth.peer_secret_file: {path} is empty")
    if not _PEER_SECRET.match(secret):
        raise ConfigError(
            f"auth.peer_secret_file: {path}: the secret must be 16 or more letters, digits or ._~+/=- "
            "(e.g. `openssl rand -hex 32`)"
        )
    return secret


def peer_secret(cfg: AuthConfig) -> str | None:
    """The deployment's shared secret, read from its file now; None on a single host."""
    return load_peer_secret(cfg.peer_secret_file) if cfg.peer_secret_file else None


def peer_headers(cfg: AuthConfig) -> dict[str, str]:
    """The header every request to a host's replicas (and the host's Nginx) carries; none unset."""
    secret = peer_secret(cfg)
    return {PEER_HEADER: secret} if secret else {}


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("latin-1", errors="replace")).digest()


def peer_matches(given: str | None, secret: str) -> bool:
    """Whether the header holds the secret, in time that does not depend on where they differ."""
    return given is not None and hmac.compare_digest(_digest(given), _digest(secret))

"""The listen check: whether `up` (or the gateway) may start on the addresses it is given."""

from __future__ import annotations

import ipaddress

from hunyuan_serve.auth.keys import load_keys
from hunyuan_serve.auth.peer import peer_secret
from hunyuan_serve.auth.secret_files import refuse_exposed
from hunyuan_serve.config import ConfigError, ServeConfig


def open_listen_problem(cfg: ServeConfig, *, peer_guards_listen: bool = True) -> str | None:
    """Why `up` (or the gateway) must not start as configured: an unusable keys or secret file, or a
    non-loopback address that nothing guards; a secret file others may read raises SecretFileError
    (refuse_exposed). peer_guards_listen: the peer secret guards nginx.listen (a host's Nginx refuses
    callers without it; a gateway's public front does not)."""
    refuse_exposed(cfg)
    try:
        if cfg.auth.keys_file:
            load_keys(cfg.auth.keys_file)
        peer = peer_secret(cfg.auth) is not None
    except ConfigError as err:
        return str(err)
    if not (is_loopback(cfg.replica.host) or peer or cfg.auth.allow_open):
        return (
            f"replica.host {cfg.replica.host} is not loopback and no auth.peer_secret_file is set, so anyone "
            "on that network could call the replicas; set auth.peer_secret_file (the gateway's), or "
            "auth.allow_open: true"
        )
    if (
        is_loopback(cfg.nginx.listen)
        or cfg.auth.keys_file
        or cfg.auth.allow_open
        or (peer and peer_guards_listen)
    ):
        return None
    return (
        f"nginx.listen {cfg.nginx.listen} is not loopback and no auth.keys_file is set, so anyone could "
        "call the API; set auth.keys_file, auth.peer_secret_file on a host behind a gateway, or "
        "auth.allow_open: true to serve it open"
    )


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False

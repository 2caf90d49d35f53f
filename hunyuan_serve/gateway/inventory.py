"""The gateway's inventory file: the hosts it fronts, the shared secret, its own settings; pure, validated."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from hunyuan_serve.auth import is_loopback
from hunyuan_serve.config import (
    AuthConfig,
    ConfigError,
    GatewayConfig,
    LogsConfig,
    NginxConfig,
    Section,
    ServeConfig,
    read_yaml,
    validation_problems,
)

# A host's name is a label in tables, events and /health; its URL is where its Nginx answers.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_URL = re.compile(
    r"^(?P<scheme>https?)://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:(?P<port>[0-9]{1,5}))?/?$"
)
# A file path goes into the gateway's Nginx config as it is: nothing that would end or bend a directive.
_UNQUOTABLE = re.compile(r"[\s\"'$;{}\\]")
# The name in every host's replica certificate that the gateway's Nginx verifies: a DNS name.
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_TLS_NAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")
_TLS_FILES = ("tls_ca", "tls_cert", "tls_key")


class HostEntry(Section):
    """One GPU host running `hunyuan-serve up`: a name and the URL of its Nginx."""

    name: str = Field(description="Label of the host in `gateway status`, events and /health.")
    url: str = Field(
        description="Its Nginx, e.g. https://10.77.0.2:8443 (scheme, address, port; no path); https: TLS on "
        "every hop to the host (its Nginx and its replicas), or the gateway refuses it."
    )
    allow_plain: bool = Field(
        False,
        description="Let the peer secret go to this host in plain HTTP though its address is not loopback "
        "(only on a network you trust end to end); an https url never needs it.",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} is not a host name (letters, digits, ._-; at most 63)")
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        match = _URL.match(value)
        if not match:
            raise ValueError(f"{value!r} is not a host URL like http://10.77.0.2:8080 (no path)")
        if match["port"] and not 1 <= int(match["port"]) <= 65535:
            raise ValueError(f"{value!r}: the port is not from 1 to 65535")
        return value.rstrip("/")

    @property
    def tls(self) -> bool:
        return self.url.startswith("https://")

    @property
    def address(self) -> str:
        """The URL's host: a name, an IPv4 address or an [IPv6] one."""
        match = _URL.match(self.url)
        return match["host"] if match else ""


class Inventory(Section):
    """What `hunyuan-serve gateway --inventory FILE` reads."""

    peer_secret_file: str | None = Field(
        None, description="The secret file the hosts were started with (auth.peer_secret_file)."
    )
    # At least one, checked after the entries: pydantic's min_length also fires when an entry is invalid.
    hosts: tuple[HostEntry, ...] = Field(description="The hosts behind the gateway.")
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    nginx: NginxConfig = Field(default_factory=NginxConfig)
    # The front's own API settings: keys_file (the replicas check the keys), allow_open, rate limits.
    auth: AuthConfig = Field(default_factory=AuthConfig)
    logs: LogsConfig = Field(default_factory=LogsConfig)
    run_dir: str = Field("", description="Where the gateway's Nginx, state and events go.")
    # TLS to the hosts (docs/tls-hosts.md): gateway-wide, since one Nginx upstream spans every host's
    # replicas and Nginx's proxy_ssl_* settings are per location, not per server.
    tls_ca: str | None = Field(
        None, description="CA file (PEM) that verifies every https host's certificates; needed with https."
    )
    tls_cert: str | None = Field(
        None, description="Client certificate (PEM) shown to the hosts (mutual TLS: replica.tls_client_ca)."
    )
    tls_key: str | None = Field(None, description="Private key (PEM) of tls_cert.")
    tls_name: str | None = Field(
        None,
        description="The DNS name every host's replica certificate carries, which the gateway's Nginx and "
        "probes verify (the replicas are reached by address); needed with https.",
    )

    @field_validator(*_TLS_FILES)
    @classmethod
    def _tls_file(cls, value: str | None) -> str | None:
        if value and _UNQUOTABLE.search(value):
            raise ValueError(f"{value!r}: a path with a quote, '$', ';', braces or whitespace")
        return value

    @field_validator("tls_name")
    @classmethod
    def _tls_name(cls, value: str | None) -> str | None:
        if value is not None and not _TLS_NAME.match(value):
            raise ValueError(f"{value!r} is not a DNS name like replicas.hunyuan.internal")
        return value

    @model_validator(mode="after")
    def _distinct_hosts(self) -> Inventory:
        if not self.hosts:
            raise ValueError("hosts: list at least one host, e.g. - {name: a, url: http://10.77.0.2:8080}")
        for field in ("name", "url"):
            values = [getattr(h, field) for h in self.hosts]
            twice = sorted({v for v in values if values.count(v) > 1})
            if twice:
                raise ValueError(f"hosts: {field} {', '.join(twice)} listed more than once")
        if self.auth.peer_secret_file:
            raise ValueError("auth.peer_secret_file: name the secret as the top-level peer_secret_file")
        problem = tls_problem(self)
        if problem:
            raise ValueError(problem)
        return self

    def serve_config(self) -> ServeConfig:
        """The front's settings in the shape the Nginx renderer takes (the one config model)."""
        auth = self.auth.model_copy(update={"peer_secret_file": self.peer_secret_file})
        return ServeConfig(nginx=self.nginx, auth=auth, logs=self.logs)


def tls_problem(inv: Inventory) -> str | None:
    """Why the hosts' TLS settings do not hold together, naming the keys (None: they do): https on every
    host or none, its CA and name; over plain HTTP, the peer secret only to loopback or where allowed."""
    https = [h.name for h in inv.hosts if h.tls]
    plain = [h.name for h in inv.hosts if not h.tls]
    if https and plain:
        return (
            f"hosts: {', '.join(https)} https and {', '.join(plain)} http: a gateway's hosts are all https "
            "or all http (one Nginx upstream spans their replicas)"
        )
    if (inv.tls_cert is None) != (inv.tls_key is None):
        return "tls_cert and tls_key are set together (the client certificate and its key)"
    if https:
        missing = [key for key in ("tls_ca", "tls_name") if not getattr(inv, key)]
        if missing:
            return (
                f"{' and '.join(missing)}: needed with https hosts (the CA that signed the hosts' "
                "certificates; the DNS name each host's replica certificate carries)"
            )
        allowed = [f"hosts[{i}].allow_plain" for i, h in enumerate(inv.hosts) if h.allow_plain]
        return f"{', '.join(allowed)}: the url is https; drop allow_plain" if allowed else None
    named = [key for key in (*_TLS_FILES, "tls_name") if getattr(inv, key)]
    if named:
        return f"{', '.join(named)}: set, but every host url is http:// (write https:// for TLS)"
    for i, host in enumerate(inv.hosts):
        if inv.peer_secret_file and not host.allow_plain and not is_loopback(host.address):
            return (
                f"hosts[{i}] ({host.name}): the peer secret would cross the network in plain HTTP to "
                f"{host.address}, which is not loopback; give the host an https:// url (docs/tls-hosts.md), "
                "or allow_plain: true for a network you trust end to end"
            )
    return None


def with_port(inventory: Inventory, port: int) -> Inventory:
    """`gateway --port` over the inventory's nginx.port, validated as the file's own would be."""
    try:
        nginx = NginxConfig.model_validate({**inventory.nginx.model_dump(), "port": port})
    except ValidationError as err:
        raise ConfigError(f"--port {port}: {validation_problems(err)}") from None
    return inventory.model_copy(update={"nginx": nginx})


def parse_inventory(data: Any, source: str, base_dir: Path) -> Inventory:
    """Validate a parsed inventory; errors name the key and the file. A relative secret or TLS file is
    read from the inventory's folder."""
    if not isinstance(data, dict):
        raise ConfigError(f"inventory {source}: must be a mapping with hosts: [...]")
    files = {}
    for key in ("peer_secret_file", *_TLS_FILES):
        value = data.get(key)
        if isinstance(value, str) and value:
            path = Path(value).expanduser()
            files[key] = str(path if path.is_absolute() else base_dir / path)
    try:
        return Inventory.model_validate({**data, **files})
    except ValidationError as err:
        raise ConfigError(f"inventory {source}: {validation_problems(err)}") from None


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate an inventory YAML file."""
    return parse_inventory(read_yaml(path, "inventory"), str(path), Path(path).resolve().parent)

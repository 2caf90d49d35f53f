"""The gateway's inventory file: the hosts it fronts, the shared secret, its own settings; pure, validated."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

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
_URL = re.compile(r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:(?P<port>[0-9]{1,5}))?/?$")


class HostEntry(Section):
    """One GPU host running `hunyuan-serve up`: a name and the URL of its Nginx."""

    name: str = Field(description="Label of the host in `gateway status`, events and /health.")
    url: str = Field(description="Its Nginx, e.g. http://10.77.0.2:8080 (scheme, address, port; no path).")

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
        return self

    def serve_config(self) -> ServeConfig:
        """The front's settings in the shape the Nginx renderer takes (the one config model)."""
        auth = self.auth.model_copy(update={"peer_secret_file": self.peer_secret_file})
        return ServeConfig(nginx=self.nginx, auth=auth, logs=self.logs)


def with_port(inventory: Inventory, port: int) -> Inventory:
    """`gateway --port` over the inventory's nginx.port, validated as the file's own would be."""
    try:
        nginx = NginxConfig.model_validate({**inventory.nginx.model_dump(), "port": port})
    except ValidationError as err:
        raise ConfigError(f"--port {port}: {validation_problems(err)}") from None
    return inventory.model_copy(update={"nginx": nginx})


def parse_inventory(data: Any, source: str, base_dir: Path) -> Inventory:
    """Validate a parsed inventory; errors name the key and the file. A relative secret file is
    read from the inventory's folder."""
    if not isinstance(data, dict):
        raise ConfigError(f"inventory {source}: must be a mapping with hosts: [...]")
    secret = data.get("peer_secret_file")
    if isinstance(secret, str) and secret and not Path(secret).expanduser().is_absolute():
        data = {**data, "peer_secret_file": str(base_dir / secret)}
    try:
        inventory = Inventory.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"inventory {source}: {validation_problems(err)}") from None
    if inventory.peer_secret_file:
        inventory = inventory.model_copy(
            update={"peer_secret_file": str(Path(inventory.peer_secret_file).expanduser())}
        )
    return inventory


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate an inventory YAML file."""
    return parse_inventory(read_yaml(path, "inventory"), str(path), Path(path).resolve().parent)

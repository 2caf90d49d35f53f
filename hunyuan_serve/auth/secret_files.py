"""The secret files a configuration names (keys, the peer secret, TLS keys), each checked at start."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.private_files import exposed_problem

# The auth section's secret files by name; every private key is a field named tls_key or *_tls_key
# (the convention of every TLS option: nginx.tls_key, replica.cache_redis_tls_key...).
AUTH_SECRETS = ("keys_file", "peer_secret_file")


def _is_secret(section: str, name: str) -> bool:
    return (section == "auth" and name in AUTH_SECRETS) or name == "tls_key" or name.endswith("_tls_key")


def secret_paths(model: BaseModel, where: str = "") -> Iterator[tuple[str, str]]:
    """(its config key, its path) for every secret file the model and its sections name."""
    for name, value in model:
        key = f"{where}.{name}" if where else name
        section = where.rsplit(".", 1)[-1]
        if isinstance(value, BaseModel):
            yield from secret_paths(value, key)
        elif isinstance(value, tuple):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from secret_paths(item, f"{key}[{index}]")
        elif isinstance(value, str) and value and _is_secret(section, name):
            yield key, value


def exposed_secrets(cfg: ServeConfig) -> list[str]:
    """Why each secret file the config names may not be started with: others may read (or write) it
    (private_files.exposed_problem: a missing file is its reader's to name, a mounted one the mount's)."""
    problems: list[str] = []
    for key, path in dict(secret_paths(cfg)).items():
        problem = exposed_problem(path, key)
        if problem and problem not in problems:
            problems.append(problem)
    return problems

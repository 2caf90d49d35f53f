"""The secret files a configuration names (keys, the peer secret, TLS keys), each checked at start."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pydantic import BaseModel

from hunyuan_serve.config import SecretFileError, ServeConfig
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


def exposed_secrets(cfg: ServeConfig, more: Iterable[tuple[str, str]] = ()) -> list[str]:
    """Why each secret file the config names (and `more`: (name, path) of files outside it, such as a
    gateway inventory's client key) may not be started with: others may read (or write) it
    (private_files.exposed_problem: a missing file is its reader's to name, a mounted one the mount's)."""
    problems: list[str] = []
    for key, path in dict([*secret_paths(cfg), *more]).items():
        problem = exposed_problem(path, key)
        if problem and problem not in problems:
            problems.append(problem)
    return problems


def refuse_exposed(
    cfg: ServeConfig, *, also: Iterable[str] = (), more: Iterable[tuple[str, str]] = ()
) -> None:
    """SecretFileError (exit 2) naming every secret file others may read, with the other problems found
    at the same check (`also`: a TLS pair's other faults), so one refusal says every reason; the one
    check of secret files that up, reload, replica and gateway share."""
    exposed = exposed_secrets(cfg, more)
    if exposed:
        raise SecretFileError("; ".join([*exposed, *(p for p in also if p not in exposed)]))

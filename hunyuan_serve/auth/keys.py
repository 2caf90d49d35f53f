"""The keys file: each key and its options, and a key's identity where the key itself must not go."""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hunyuan_serve.config import AuthConfig, ConfigError
from hunyuan_serve.config.qa import QA_POLICIES


@dataclass(frozen=True)
class KeySpec:
    """One key of the keys file and its options: `limit`, the characters it may translate (None: no limit);
    `priority`, the class of its requests that name none (None: the endpoint's default); `weight`, its
    share of the bulk slots against other keys with bulk work in flight; `qa`, the answer checks'
    policy for its requests that name none (None: the pool's replica.qa)."""

    key: str
    limit: int | None = None
    priority: str | None = None
    weight: int = 1
    qa: str | None = None


# A line: the key, then options as name=value, each separated by spaces:
# `sk-abc123 limit=500000 priority=bulk weight=2 qa=retry`.
_KEY_OPTIONS = ("limit", "priority", "weight", "qa")
KEY_PRIORITIES = ("interactive", "bulk")


def load_key_specs(path: str) -> dict[str, KeySpec]:
    """Every key of a keys file with its options; blank lines and `#` comments skipped; none is an error."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        # In a container the file is a mounted secret: say which user must be able to read it.
        who = f" as uid {os.getuid()}" if isinstance(err, PermissionError) else ""
        raise ConfigError(f"auth.keys_file: cannot read {path}{who}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"auth.keys_file: {path} is not UTF-8 text") from None
    specs: dict[str, KeySpec] = {}
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        spec = _key_spec(words, f"auth.keys_file: {path} line {number}")
        if specs.get(spec.key, spec) != spec:
            raise ConfigError(f"auth.keys_file: {path} line {number}: a key listed before with other options")
        specs[spec.key] = spec
    if not specs:
        raise ConfigError(f"auth.keys_file: {path} holds no key")
    return specs


def _key_spec(words: list[str], where: str) -> KeySpec:
    """A line's key and options; the message names the line and the option, never the key."""
    options: dict[str, str] = {}
    for word in words[1:]:
        name, equals, value = word.partition("=")
        if not equals or name not in _KEY_OPTIONS:
            raise ConfigError(
                f"{where}: a key holds a space, or an option after it is not name=value "
                f"({', '.join(_KEY_OPTIONS)})"
            )
        options[name] = value
    limit = None
    if "limit" in options:
        digits = options["limit"].replace("_", "")
        if not digits.isdigit():
            raise ConfigError(f"{where}: limit= takes a whole number of characters, e.g. limit=500000")
        limit = int(digits)
    priority = options.get("priority")
    if priority is not None and priority not in KEY_PRIORITIES:
        raise ConfigError(f"{where}: priority= takes interactive or bulk")
    weight = options.get("weight", "1")
    if not weight.isdigit() or int(weight) < 1:
        raise ConfigError(f"{where}: weight= takes a whole number of at least 1, e.g. weight=2")
    qa = options.get("qa")
    if qa is not None and qa not in QA_POLICIES:
        raise ConfigError(f"{where}: qa= takes {', '.join(QA_POLICIES)}")
    return KeySpec(words[0], limit, priority, int(weight), qa)


def load_keys(path: str) -> frozenset[str]:
    """The keys of a keys file: one a line (options after it), blank lines and `#` comments skipped."""
    return frozenset(load_key_specs(path))


def key_limits(cfg: AuthConfig) -> dict[str, int | None]:
    """Each key's limit by key_id (none without a keys file): what the replica's usage check reads."""
    if not cfg.keys_file:
        return {}
    return {key_id(spec.key): spec.limit for spec in load_key_specs(cfg.keys_file).values()}


def key_priorities(specs: Mapping[str, KeySpec]) -> dict[str, str]:
    """The keys that name a default class (priority=), by key_id, and that class."""
    return {kid: spec.priority for kid, spec in specs.items() if spec.priority}


def key_qa(specs: Mapping[str, KeySpec]) -> dict[str, str]:
    """The keys that name an answer checks' policy (qa=), by key_id, and that policy."""
    return {kid: spec.qa for kid, spec in specs.items() if spec.qa}


def key_specs_by_id(cfg: AuthConfig) -> dict[str, KeySpec]:
    """Each key's options by key_id (none without a keys file): what the replica's priority rules read."""
    if not cfg.keys_file:
        return {}
    return {key_id(spec.key): spec for spec in load_key_specs(cfg.keys_file).values()}


def key_id(key: str) -> str:
    """The key's identity where the key itself must not go (owners, logs, metrics): its SHA-256, hex."""
    return hashlib.sha256(key.encode()).hexdigest()


def key_matches(given: str, keys: frozenset[str]) -> bool:
    """Whether the key is one of the keys, in time that does not depend on where they differ."""
    # Digests of equal length: compare_digest returns at once on a length mismatch, which would tell it.
    digest = hashlib.sha256(given.encode()).digest()
    found = False
    for key in keys:  # every key compared, so the time does not tell which one came close
        found |= hmac.compare_digest(digest, hashlib.sha256(key.encode()).digest())
    return found

"""The policy: off, flag or retry, from the request, else the caller's key, else the pool."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hunyuan_serve.config.qa import QA_POLICIES
from hunyuan_serve.qa.flags import EMPTY, Flag

OFF, FLAG, RETRY = QA_POLICIES


class PolicyInvalid(ValueError):
    """A `qa` value that is not one of the policies, worded for the caller."""


def parse_policy(value: Any, where: str = "qa") -> str | None:
    """A request's or a key's `qa`: one of off, flag, retry; None when not given."""
    if value is None:
        return None
    if value not in QA_POLICIES:
        shown = json.dumps(value)[:40] if not isinstance(value, str) else repr(value[:40])
        raise PolicyInvalid(f"{where} must be one of {', '.join(QA_POLICIES)}, got {shown}")
    return str(value)


def effective(request: str | None, key: str | None, pool: str) -> str:
    """What applies: the request's own, else its key's (keys file qa=), else the pool's (replica.qa)."""
    return request or key or pool


def better(first: Sequence[Flag], second: Sequence[Flag]) -> bool:
    """Whether a retry's answer replaces the first: only when it fails fewer checks (a tie keeps the
    first, which the cache holds and an identical request gets); an empty answer is worse than any."""
    return _rank(second) < _rank(first)


def _rank(flags: Sequence[Flag]) -> tuple[bool, int]:
    return any(flag.check == EMPTY for flag in flags), len(flags)

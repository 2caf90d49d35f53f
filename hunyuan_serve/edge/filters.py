"""Nginx's value syntax: the Jinja filters the config template writes values with, and its sizes."""

from __future__ import annotations

import json
import math
from typing import Any


def nginx_time(seconds: float) -> str:
    """Seconds as an Nginx time: whole seconds as '5s', anything finer in milliseconds."""
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{max(1, round(seconds * 1000))}ms"


def nginx_rate(rps: float) -> str:
    """Requests per second as an Nginx rate; Nginx takes only whole r/s or r/m."""
    if rps >= 1 and float(rps).is_integer():
        return f"{int(rps)}r/s"
    return f"{max(1, math.ceil(rps * 60))}r/m"


def nginx_json(value: Any) -> str:
    """A JSON body as one single-quoted Nginx string."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # Nginx would read a "$" as a variable and has no escape for it; JSON's \u0024 is the same text.
    text = text.replace("$", "\\u0024")
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def parse_size(text: str) -> int:
    """An Nginx size (8m, 512k, 1g, 100) in bytes."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    value = text.strip().lower()
    if value and value[-1] in units:
        return int(value[:-1]) * units[value[-1]]
    return int(value)

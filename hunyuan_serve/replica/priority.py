"""A request's class, interactive or bulk, and the admission rule that keeps slots for people."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping

from hunyuan_serve.config.replica import bulk_slots
from hunyuan_serve.replica.errors import ApiError

INTERACTIVE = "interactive"
BULK = "bulk"
CLASSES = (INTERACTIVE, BULK)
HEADER = "X-Priority"
# vLLM's priority scheduler serves the lowest value first (vllm/v1/core/sched: requests are ordered
# by (priority, arrival_time)).
ENGINE_PRIORITY = {INTERACTIVE: 0, BULK: 1}
# The admitted request's class, set by the Gate around its handler: the translation core reads it
# where it calls the engine, so no adapter has to carry it (tasks copy the context they start in).
CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("hunyuan_priority", default=INTERACTIVE)


def engine_priority() -> int:
    """The current request's priority as vLLM takes it (lower is scheduled first)."""
    return ENGINE_PRIORITY[CURRENT.get()]


def request_class(
    header: str | None,
    field: object = None,
    key_default: str | None = None,
    endpoint_default: str = INTERACTIVE,
) -> str:
    """The header, else the body's `priority` field, else the key's default, else the endpoint's.

    A header or field that is neither class is a 400 naming where it came from.
    """
    if header is not None:
        value = header.strip().lower()
        if value not in CLASSES:
            message = f"{HEADER} must be interactive or bulk, not {header[:40]!r}"
            raise ApiError(400, "invalid_priority", message)
        return value
    if field is not None:
        if field not in CLASSES:
            raise ApiError(400, "invalid_priority", 'priority must be "interactive" or "bulk"')
        return str(field)
    return key_default or endpoint_default


def body_field(value: object) -> str | None:
    """A native body's `priority`: None when absent, else one of the classes (else the 400)."""
    if value is None:
        return None
    return request_class(None, value)


def endpoint_default(texts: int) -> str:
    """One text is a person waiting (the page, chat, a single /translate); more is a job."""
    return INTERACTIVE if texts <= 1 else BULK


def admits(
    cls: str,
    key: str | None,
    *,
    in_flight: int,
    bulk_in_flight: Mapping[str | None, int],
    weights: Mapping[str | None, int],
    max_in_flight: int,
    reserve: float,
    key_share_min: int,
) -> str | None:
    """None when one more request of `cls` for `key` may enter, else why not (the 503's message).

    Interactive work may use every slot; bulk stops at max_in_flight minus the reserve; while two or
    more keys hold bulk work, one key's bulk stops at its weighted share of the bulk slots.
    """
    if in_flight >= max_in_flight:
        return f"{in_flight} requests in flight (max_in_flight)"
    if cls != BULK:
        return None
    bulk_cap = bulk_slots(max_in_flight, reserve)
    bulk_total = sum(bulk_in_flight.values())
    if bulk_total >= bulk_cap:
        return f"{bulk_total} bulk requests in flight (max_in_flight less interactive_reserve)"
    busy = {k for k, n in bulk_in_flight.items() if n > 0} | {key}
    if len(busy) < 2:
        return None
    total_weight = sum(weights.get(k, 1) for k in busy)
    share = max(key_share_min, bulk_cap * weights.get(key, 1) // total_weight)
    held = bulk_in_flight.get(key, 0)
    if held >= share:
        return f"this key holds {held} bulk requests, its share ({share}) while other keys wait"
    return None

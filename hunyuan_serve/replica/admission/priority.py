"""A request's class, interactive or bulk, and the admission rule that keeps slots for people."""

from __future__ import annotations

import contextvars
import math
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from hunyuan_serve.config.replica import bulk_slots
from hunyuan_serve.replica.errors import ApiError

INTERACTIVE = "interactive"
BULK = "bulk"
CLASSES = (INTERACTIVE, BULK)
HEADER = "X-Priority"
# vLLM's priority scheduler serves the lowest value first (vllm/v1/core/sched: requests are ordered
# by (priority, arrival_time)).
ENGINE_PRIORITY = {INTERACTIVE: 0, BULK: 1}
# The admitted request's key (its key_id; None without a keys file), set by the Gate: whose answer-check
# policy applies (replica/review.py). The translation core gets class and key as a Caller instead.
KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("hunyuan_key", default=None)


@dataclass(frozen=True)
class Caller:
    """Whom a call to the translation core is for: the request's id, its class and its key (key_id)."""

    request_id: str
    cls: str = INTERACTIVE
    key: str | None = None


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


class Waiting:
    """Who was refused a place lately and so waits to retry (a refused client comes back after
    Retry-After): interactive work, and each bulk request's key. For
    `window_s` after its last refusal a class or key counts as waiting; admitted, it waits no more."""

    def __init__(self, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.clock = clock
        self._interactive: float | None = None
        self._keys: dict[str | None, float] = {}

    def refused(self, cls: str, key: str | None) -> None:
        if cls == BULK:
            self._keys[key] = self.clock()
        else:
            self._interactive = self.clock()

    def admitted(self, cls: str, key: str | None) -> None:
        if cls == BULK:
            self._keys.pop(key, None)
        else:
            self._interactive = None

    def interactive(self) -> bool:
        return self._interactive is not None and self.clock() - self._interactive < self.window_s

    def keys(self) -> frozenset[str | None]:
        """The bulk keys refused within the window (older ones forgotten)."""
        now = self.clock()
        for key in [k for k, t in self._keys.items() if now - t >= self.window_s]:
            del self._keys[key]
        return frozenset(self._keys)


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
    interactive_waiting: bool = False,
    waiting_keys: Collection[str | None] = (),
) -> str | None:
    """None when one more request of `cls` for `key` may enter, else why not (the 503's message).

    Interactive work may use every slot; bulk stops at max_in_flight minus the reserve, and takes no
    freed slot while interactive work waits for one; while two or more keys hold bulk work or wait
    for it, one key's bulk stops at its weighted share of the bulk slots.
    """
    if in_flight >= max_in_flight:
        return f"{in_flight} requests in flight (max_in_flight)"
    if cls != BULK:
        return None
    if interactive_waiting:
        return "interactive requests wait for a place: bulk work waits until they have one"
    bulk_cap = bulk_slots(max_in_flight, reserve)
    bulk_total = sum(bulk_in_flight.values())
    if bulk_total >= bulk_cap:
        return f"{bulk_total} bulk requests in flight (max_in_flight less interactive_reserve)"
    # What each key asks for: the asking key and every key refused lately (it comes back) want more;
    # any other key holding bulk work wants what it holds. Counting the waiting keys matters: else the
    # key holding every slot takes each freed one back before the other's retry arrives.
    demand: dict[str | None, float] = {k: n for k, n in bulk_in_flight.items() if n > 0}
    demand.update(dict.fromkeys((*waiting_keys, key), math.inf))
    if len(demand) < 2:
        return None
    share = max(key_share_min, math.floor(weighted_shares(bulk_cap, demand, weights)[key]))
    held = bulk_in_flight.get(key, 0)
    if held >= share:
        return f"this key holds {held} bulk requests, its share ({share}) while other keys wait"
    return None


def weighted_shares(
    slots: int, demand: Mapping[str | None, float], weights: Mapping[str | None, int]
) -> dict[str | None, float]:
    """Max-min fair shares of `slots` by weight (water-filling): no key gets more than it asks for,
    and what one leaves goes to the others in proportion to their weights (a key's weight: 1 unless
    the keys file says weight=N). So a small job's key does not hold back a big one's slots."""
    left, open_, shares = float(slots), dict(demand), {}
    while open_:
        level = left / sum(weights.get(k, 1) for k in open_)
        met = {k: d for k, d in open_.items() if d <= level * weights.get(k, 1)}
        if not met:
            shares.update({k: level * weights.get(k, 1) for k in open_})
            break
        for k, d in met.items():
            shares[k] = d
            left -= d
            del open_[k]
    return shares

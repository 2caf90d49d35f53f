"""The order of admission over scripted histories on a fake clock: clients that come back
after Retry-After as the translate CLI does, bulk jobs that resubmit the moment a batch is answered.

No sleeps and no timings: events run in (time, order) from a heap, the clock is a number the history
sets, and the assertions are on who got which place when.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field

import pytest

from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.admission.in_flight import Admission
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.lifecycle import Lifecycle, Phase

WINDOW_S = 5.0


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


def _admission(clock: Clock, max_in_flight: int, weights: dict[str | None, int] | None = None) -> Admission:
    lifecycle = Lifecycle()
    lifecycle.move(Phase.WARMING)
    lifecycle.move(Phase.READY)
    waiting = priority.Waiting(WINDOW_S, clock.now)
    return Admission(lifecycle, max_in_flight, 1, interactive_reserve=0.25, weights=weights, waiting=waiting)


def _try(admission: Admission, cls: str, key: str | None) -> str:
    try:
        admission.enter(cls, key)
    except ApiError as err:
        assert err.status == 503 and err.code == "overloaded"
        return "refused"
    return "ok"


def test_while_a_person_waits_bulk_takes_no_freed_place() -> None:
    clock = Clock()
    admission = _admission(clock, 4)  # bulk may hold 3 of 4
    seen = [_try(admission, "bulk", "ci") for _ in range(3)] + [_try(admission, "interactive", None)]
    assert seen == ["ok"] * 4
    assert _try(admission, "interactive", None) == "refused"  # every place taken: a person waits
    clock.t = 0.4
    admission.leave("bulk", "ci")  # a batch answered; the job sends its next one at once
    assert _try(admission, "bulk", "ci") == "refused"
    clock.t = 1.0  # the person's retry, after Retry-After: the freed place is theirs
    assert _try(admission, "interactive", None) == "ok"
    assert admission.by_class == {"interactive": 2, "bulk": 2}
    clock.t = 1.5
    admission.leave("interactive", None)
    assert _try(admission, "bulk", "ci") == "ok"  # nobody waits any more: bulk gets it back


def test_a_person_who_gave_up_holds_bulk_back_for_the_window_only() -> None:
    clock = Clock()
    admission = _admission(clock, 4)
    for cls in ("bulk", "bulk", "bulk", "interactive", "interactive"):
        _try(admission, cls, "ci" if cls == "bulk" else None)
    admission.leave("bulk", "ci")
    clock.t = WINDOW_S - 0.1
    assert _try(admission, "bulk", "ci") == "refused"
    clock.t = WINDOW_S
    assert _try(admission, "bulk", "ci") == "ok"


@dataclass(order=True)
class _Event:
    t: float
    seq: int
    what: str = field(compare=False)  # "ask" or "done"
    client: int = field(compare=False)


@dataclass
class _History:
    """Closed-loop clients on one Admission: each asks, holds its place `hold_s` if admitted and asks
    again at once, or asks again `retry_s` after a refusal (Retry-After)."""

    admission: Admission
    clock: Clock
    clients: list[tuple[str, str | None, float]] = field(default_factory=list)  # (class, key, first ask)
    hold_s: float = 1.0
    retry_s: float = 1.0
    admitted: list[tuple[float, str | None]] = field(default_factory=list)
    held: list[tuple[float, dict[str | None, int]]] = field(default_factory=list)

    def run(self, until: float) -> None:
        seq = itertools.count()
        heap = [_Event(start, next(seq), "ask", i) for i, (_, _, start) in enumerate(self.clients)]
        heapq.heapify(heap)
        while heap and heap[0].t <= until:
            event = heapq.heappop(heap)
            self.clock.t = event.t
            cls, key, _ = self.clients[event.client]
            if event.what == "done":
                self.admission.leave(cls, key)
                heapq.heappush(heap, _Event(event.t, next(seq), "ask", event.client))
            elif _try(self.admission, cls, key) == "ok":
                self.admitted.append((event.t, key))
                self.held.append((event.t, dict(self.admission.bulk_by_key)))
                heapq.heappush(heap, _Event(event.t + self.hold_s, next(seq), "done", event.client))
            else:
                heapq.heappush(heap, _Event(event.t + self.retry_s, next(seq), "ask", event.client))


def test_a_key_that_came_later_is_not_starved() -> None:
    clock = Clock()
    admission = _admission(clock, 8)  # 6 bulk places
    history = _History(admission, clock, [("bulk", "a", 0.0)] * 8 + [("bulk", "b", 0.25)] * 8)
    history.run(20.0)
    first_b = min(t for t, key in history.admitted if key == "b")
    # a took every place before b came; b's retry at 1.25 s finds the places a gave back at 1 s.
    assert first_b == 1.25
    late = [counts for t, counts in history.held if t >= 3.0]
    assert late and all(counts.get("a", 0) <= 3 and counts.get("b", 0) <= 3 for counts in late)
    answered = [key for t, key in history.admitted if 5.0 <= t < 20.0]
    assert answered.count("a") == answered.count("b")


def test_two_keys_share_by_weight() -> None:
    clock = Clock()
    admission = _admission(clock, 8, weights={"a": 2, "b": 1})  # 6 bulk places: a 4, b 2
    history = _History(admission, clock, [("bulk", "a", 0.0)] * 8 + [("bulk", "b", 0.0)] * 8)
    history.run(30.0)
    late = [counts for t, counts in history.held if t >= 2.0]
    assert late and all(counts.get("a", 0) <= 4 and counts.get("b", 0) <= 2 for counts in late)
    answered = [key for t, key in history.admitted if 2.0 <= t < 30.0]
    assert answered.count("a") == 2 * answered.count("b") > 0


def test_a_small_job_leaves_the_big_one_its_places() -> None:
    clock = Clock()
    admission = _admission(clock, 8)
    # b sends one batch at a time: a may use the five places b does not (max-min fair, not halves).
    history = _History(admission, clock, [("bulk", "a", 0.0)] * 8 + [("bulk", "b", 0.0)])
    history.run(10.0)
    late = [counts for t, counts in history.held if t >= 2.0]
    assert late and max(counts.get("a", 0) for counts in late) >= 5  # not held at half (3)
    assert all(counts.get("b", 0) <= 1 for counts in late)
    # And b is not starved: when a took its place back, b's refusal makes it a waiting key again.
    assert sum(1 for _, key in history.admitted if key == "b") >= 6


def test_interactive_work_gets_in_beside_two_bulk_jobs() -> None:
    clock = Clock()
    admission = _admission(clock, 8)
    clients = [("bulk", "a", 0.0)] * 8 + [("bulk", "b", 0.0)] * 8 + [("interactive", None, 0.5)] * 2
    history = _History(admission, clock, clients)
    history.run(10.0)
    people = [t for t, key in history.admitted if key is None]
    # Two people, each at once and again after each answer: never refused, the reserve is theirs.
    assert people == [0.5, 0.5, *[t + 0.5 for t in range(1, 10) for _ in range(2)]]


@pytest.mark.parametrize(
    ("slots", "demand", "weights", "expected"),
    [
        (6, {"a": math.inf, "b": math.inf}, {}, {"a": 3.0, "b": 3.0}),
        (6, {"a": math.inf, "b": 1}, {}, {"a": 5.0, "b": 1}),
        (6, {"a": math.inf, "b": math.inf}, {"a": 2}, {"a": 4.0, "b": 2.0}),
        (9, {"a": math.inf, "b": 2, "c": math.inf}, {"c": 2}, {"a": 7 / 3, "b": 2, "c": 14 / 3}),
        (4, {"a": 1, "b": 1}, {}, {"a": 1, "b": 1}),  # everyone content: each what it asks
    ],
)
def test_weighted_max_min_shares(
    slots: int, demand: dict[str | None, float], weights: dict[str | None, int], expected: dict[str, float]
) -> None:
    assert priority.weighted_shares(slots, demand, weights) == pytest.approx(expected)

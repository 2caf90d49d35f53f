"""Admission by expected wait: the served rate, the wait rule and the admission over them, on a fake clock."""

from __future__ import annotations

import pytest

from hunyuan_serve.replica.admission import priority, queue_wait
from hunyuan_serve.replica.admission.in_flight import Admission
from hunyuan_serve.replica.admission.queue_wait import (
    MIN_GAPS,
    Queue,
    ServedRate,
    expected_wait_s,
    wait_refusal,
)
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.lifecycle import Lifecycle, Phase


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


def _rate(events: list[tuple[float, bool]], at: float, window_s: float = 30.0) -> float | None:
    clock = Clock()
    served = ServedRate(window_s, clock.now)
    for t, saturated in events:
        clock.t = t
        served.served(saturated)
    clock.t = at
    return served.rate()


def _steady(n: int, gap: float, start: float = 0.0, saturated: bool = True) -> list[tuple[float, bool]]:
    return [(start + i * gap, saturated) for i in range(n)]


@pytest.mark.parametrize(
    ("events", "at", "expected"),
    [
        ([], 0.0, None),  # nothing served: unknown
        (_steady(MIN_GAPS, 0.5), 4.0, None),  # one answer short of MIN_GAPS gaps: unknown
        (_steady(MIN_GAPS + 1, 0.5), 4.0, 2.0),  # every place taken, an answer each half second
        (_steady(MIN_GAPS + 1, 0.5, saturated=False), 4.0, None),  # demand, not capacity: not counted
        # A batch ends in one step, the next a generation later: the mean over both, 8 answers in 2 s.
        ([(0.0, True)] + [(1.0, True)] * 4 + [(2.0, True)] * 4, 2.0, 4.0),
        ([(0.0, True)] * 9, 0.0, None),  # no time between them: no rate from that alone
        # Idle seconds between two busy spells are no gap: the rate is the spells' own.
        ([*_steady(5, 0.5), (5.0, False), *_steady(5, 0.5, start=10.0)], 12.0, 2.0),
        (_steady(MIN_GAPS + 1, 0.5), 40.0, None),  # all older than the window: forgotten
        # The latest spell's: the first is past the window.
        ([*_steady(MIN_GAPS + 1, 1.0), (9.0, False), *_steady(MIN_GAPS + 1, 0.25, start=40.0)], 42.0, 4.0),
    ],
)
def test_the_served_rate(events: list[tuple[float, bool]], at: float, expected: float | None) -> None:
    rate = _rate(events, at)
    assert rate == (pytest.approx(expected) if expected is not None else None)


QUEUE = Queue(room=10, max_queued=100, reserve=0.2, max_wait_s=5.0, deadline_s=120.0)


@pytest.mark.parametrize(
    ("cls", "in_flight", "interactive", "rate", "queue", "wait", "refused"),
    [
        ("interactive", 50, 50, None, QUEUE, 0.0, None),  # rate unknown (a first burst): it waits
        ("interactive", 9, 9, 1.0, QUEUE, 0.0, None),  # a place to run
        ("interactive", 50, 50, 10.0, QUEUE, 4.1, None),  # 41 ahead past 10 places, 10 a second
        ("interactive", 70, 70, 10.0, QUEUE, 6.1, "max_queue_wait_s=5"),
        ("interactive", 200, 5, 10.0, QUEUE, 0.0, None),  # bulk is never ahead of a person
        ("bulk", 50, 5, 10.0, QUEUE, 4.3, None),  # everyone ahead, past bulk's 8 places
        ("bulk", 60, 0, 10.0, QUEUE, 5.3, "max_queue_wait_s=5"),
        # A deadline under the wait bound is the bound.
        ("bulk", 50, 5, 10.0, Queue(10, 100, 0.2, 60.0, 3.0), 4.3, "request_timeout_s=3"),
    ],
)
def test_the_wait_rule(
    cls: str,
    in_flight: int,
    interactive: int,
    rate: float | None,
    queue: Queue,
    wait: float,
    refused: str | None,
) -> None:
    assert expected_wait_s(cls, in_flight, interactive, queue, rate) == pytest.approx(wait)
    got = wait_refusal(cls, in_flight, interactive, queue, rate)
    if refused is None:
        assert got is None
    else:
        assert got is not None and refused in got[0] and got[1] == pytest.approx(wait - float(refused[-1]))


@pytest.mark.parametrize(("least", "over", "expected"), [(1, 0.2, 1), (1, 3.2, 4), (2, 0.0, 2)])
def test_retry_after_says_when_the_queue_would_fit(least: int, over: float, expected: int) -> None:
    assert queue_wait.retry_after_s(least, over) == expected


def _admission(clock: Clock, room: int, max_queued: int, max_wait_s: float = 5.0) -> Admission:
    lifecycle = Lifecycle()
    lifecycle.move(Phase.WARMING)
    lifecycle.move(Phase.READY)
    queue = Queue(room, max_queued, 0.25, max_wait_s, 120.0)
    served = ServedRate(30.0, clock.now)
    return Admission(lifecycle, room, 1, interactive_reserve=0.25, queue=queue, served=served)


def _try(admission: Admission, cls: str, key: str | None = None) -> str:
    try:
        admission.enter(cls, key)
    except ApiError as err:
        assert err.status == 503 and err.code == "overloaded" and "Retry-After" in err.headers
        return f"refused: {err.message} (Retry-After {err.headers['Retry-After']})"
    return "ok"


def test_past_its_places_a_request_waits_until_the_queue_is_full() -> None:
    admission = _admission(Clock(), room=4, max_queued=4)
    assert [_try(admission, "interactive") for _ in range(8)] == ["ok"] * 8  # 4 run, 4 wait
    assert _try(admission, "interactive").startswith("refused: 8 requests in flight")
    assert admission.in_flight == 8


def test_bulk_waits_in_its_share_of_the_queue_and_people_still_get_in() -> None:
    admission = _admission(Clock(), room=4, max_queued=4)  # bulk: 6 of the 8 places (a quarter kept)
    seen = [_try(admission, "bulk", "ci") for _ in range(7)]
    assert seen[:6] == ["ok"] * 6 and "bulk" in seen[6]
    assert [_try(admission, "interactive") for _ in range(2)] == ["ok"] * 2


def test_a_second_key_gets_its_share_of_the_queue() -> None:
    clock = Clock()
    admission = _admission(clock, room=8, max_queued=8)  # bulk: 12 of the 16 places
    admission.waiting = priority.Waiting(5.0, clock.now)
    assert [_try(admission, "bulk", "a") for _ in range(12)] == ["ok"] * 12
    assert "12 bulk requests" in _try(admission, "bulk", "b")  # every bulk place taken: b waits to retry
    admission.leave("bulk", "a")
    assert "share (6)" in _try(admission, "bulk", "a")  # a holds 11 of 12, while b waits its share is half
    assert _try(admission, "bulk", "b") == "ok"


def test_once_the_rate_is_known_a_wait_past_the_bound_is_refused_with_its_retry_after() -> None:
    clock = Clock()
    admission = _admission(clock, room=4, max_queued=100, max_wait_s=5.0)
    assert [_try(admission, "interactive") for _ in range(40)] == ["ok"] * 40  # unknown rate: all wait
    for _ in range(MIN_GAPS + 1):  # answered 2 a second, every place taken
        clock.t += 0.5
        admission.answered()
        admission.leave()
    assert admission.in_flight == 40 - MIN_GAPS - 1
    # 31 in flight, 4 places: one more waits (31 + 1 - 4) / 2 = 14 s, 9 s past the bound.
    assert _try(admission, "interactive") == (
        "refused: the wait here would be about 14.0 s, over max_queue_wait_s=5 (Retry-After 9)"
    )
    while admission.in_flight > 13:  # 13 in flight: (13 + 1 - 4) / 2 = 5 s, within the bound
        admission.answered()
        admission.leave()
    assert _try(admission, "interactive") == "ok"


def test_without_a_queue_a_request_past_its_places_is_refused_at_once() -> None:
    admission = _admission(Clock(), room=2, max_queued=0)
    assert [_try(admission, "interactive") for _ in range(3)][2].startswith("refused: 2 requests in flight")


def _learned(clock: Clock, admission: Admission, people: int, bulk: int, per_s: float) -> None:
    """`people` and `bulk` requests in flight, and the rate learned: answers 1/per_s apart, every place
    taken (each answered request is replaced by one of its class, so the counts stay)."""
    for cls, n in ((priority.INTERACTIVE, people), (priority.BULK, bulk)):
        for _ in range(n):
            admission.enter(cls, "ci" if cls == priority.BULK else None)
    for _ in range(MIN_GAPS + 1):
        clock.t += 1 / per_s
        admission.answered()


@pytest.mark.parametrize(
    ("people", "bulk", "per_s", "cls", "ahead", "refused"),
    [
        # 4 places, 100 may wait, a wait of 5 s at most; answered 2 a second.
        (4, 0, 2.0, "interactive", 0, None),  # (4 + 1 - 4) / 2 = 0.5 s
        (4, 0, 2.0, "interactive", 9, None),  # 9 people ahead in the intake: 5 s, at the bound
        (4, 0, 2.0, "interactive", 10, "about 5.5 s, over max_queue_wait_s=5 (Retry-After 1)"),
        (4, 0, 2.0, "interactive", 26, "about 13.5 s, over max_queue_wait_s=5 (Retry-After 9)"),
        (0, 20, 2.0, "interactive", 9, None),  # bulk in flight is never ahead of a person
        (0, 20, 2.0, "bulk", 0, "about 9.0 s, over max_queue_wait_s=5 (Retry-After 4)"),
        (0, 6, 2.0, "bulk", 4, None),  # everyone ahead, past bulk's 3 places: (6 + 4 + 1 - 3) / 2 = 4 s
        (0, 6, 2.0, "bulk", 7, "about 5.5 s, over max_queue_wait_s=5 (Retry-After 1)"),
        (4, 0, 40.0, "interactive", 99, None),  # 103 of the 104 places (4 + 100), a wait of 2.5 s
        (
            4,
            0,
            40.0,
            "interactive",
            100,
            "4 requests in flight and 100 being taken in ahead: max_in_flight + max_queued=104",
        ),
        (4, 0, None, "interactive", 50, None),  # the rate unknown (a first burst): it waits its turn
    ],
)
def test_the_screen_before_the_intake_counts_those_taken_in_first(
    people: int, bulk: int, per_s: float | None, cls: str, ahead: int, refused: str | None
) -> None:
    clock = Clock()
    admission = _admission(clock, room=4, max_queued=100, max_wait_s=5.0)
    if per_s is None:
        for _ in range(people):
            admission.enter(priority.INTERACTIVE)
    else:
        _learned(clock, admission, people, bulk, per_s)
    before = (admission.in_flight, dict(admission.by_class))
    got = admission.screen(cls, "ci" if cls == priority.BULK else None, ahead)
    assert (admission.in_flight, admission.by_class) == before  # the screen takes no place
    if refused is None:
        assert got is None
        return
    assert got is not None and got.status == 503 and got.code == "overloaded"
    assert refused in f"{got.message} (Retry-After {got.headers['Retry-After']})"


def test_the_screen_refuses_a_replica_not_ready_as_enter_does() -> None:
    lifecycle = Lifecycle()
    admission = Admission(lifecycle, 4, 1, queue=Queue(4, 100, 0.25, 5.0, 120.0))
    got = admission.screen(priority.INTERACTIVE, None, 0)
    assert got is not None and got.code == "not_ready" and got.headers == {"Retry-After": "1"}


def test_without_a_queue_the_screen_refuses_only_past_the_places() -> None:
    admission = _admission(Clock(), room=4, max_queued=0)
    admission.enter(priority.INTERACTIVE)
    assert admission.screen(priority.INTERACTIVE, None, 2) is None
    got = admission.screen(priority.INTERACTIVE, None, 3)
    assert (
        got is not None and "1 requests in flight and 3 being taken in ahead: max_in_flight=4" in got.message
    )


def test_a_screened_request_is_not_judged_on_its_wait_again_when_taken_in() -> None:
    clock = Clock()
    admission = _admission(clock, room=4, max_queued=4, max_wait_s=5.0)
    _learned(clock, admission, 4, 0, 0.5)  # answered one every 2 s: one more would wait 2 s, two 4 s
    admission.enter(priority.INTERACTIVE)
    admission.enter(priority.INTERACTIVE)
    assert "about 6.0 s" in _try(admission, "interactive")  # the rate learned while it waited
    admission.enter(priority.INTERACTIVE, screened=True)  # let wait when it came: it waits
    admission.enter(priority.INTERACTIVE, screened=True)
    with pytest.raises(ApiError, match=r"8 requests in flight"):  # the queue's cap still holds
        admission.enter(priority.INTERACTIVE, screened=True)


def test_a_screened_request_whose_body_makes_it_bulk_is_not_judged_on_its_wait_either() -> None:
    clock = Clock()
    admission = _admission(clock, room=4, max_queued=100, max_wait_s=5.0)
    _learned(clock, admission, 6, 0, 0.5)  # 6 in flight, one answer every 2 s
    # As bulk, with 5 others ahead past bulk's 3 places: (5 + 1 - 3) / 0.5 = 6 s, past the bound.
    with pytest.raises(ApiError, match=r"about 6\.0 s"):
        admission.move(priority.INTERACTIVE, priority.BULK, None)
    assert admission.by_class == {priority.INTERACTIVE: 6, priority.BULK: 0}  # left as it was
    admission.move(priority.INTERACTIVE, priority.BULK, None, screened=True)
    assert admission.by_class == {priority.INTERACTIVE: 5, priority.BULK: 1}

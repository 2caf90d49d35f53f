"""The replica's own queue for engine room, on a real event loop and a fake clock: the engine is handed
at most its room, people's calls go first in arrival order, bulk is fair per key within the width."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hunyuan_serve.config.width import BulkWidthSettings
from hunyuan_serve.replica.admission.bulk_width import WidthRule
from hunyuan_serve.replica.admission.engine_room import BulkGate
from tests.replica.test_bulk_width import Clock
from tests.replica.test_bulk_width_gate import Held

# A call: its name, bulk or not, its key, its sequences ("p": a person's, "a", "b": bulk keys).
Call = tuple[str, int]


@dataclass(frozen=True)
class Case:
    """Calls submitted in order (name: p* a person's, a*/b* bulk of key a/b; seqs), then calls finished
    one at a time; the calls in the engine after the submissions and after each finish."""

    room: int
    full: int  # the bulk width with nobody waiting
    submitted: tuple[Call, ...]
    finished: tuple[str, ...]
    engine: tuple[frozenset[str], ...]  # first after the submissions, then after each finish


def _set(*names: str) -> frozenset[str]:
    return frozenset(names)


CASES = {
    "people past the room wait, in arrival order": Case(
        room=2,
        full=2,
        submitted=(("p1", 1), ("p2", 1), ("p3", 1), ("p4", 1)),
        finished=("p2", "p1"),
        engine=(_set("p1", "p2"), _set("p1", "p3"), _set("p3", "p4")),
    ),
    "a freed place goes to a waiting person before waiting bulk": Case(
        room=3,
        full=2,
        submitted=(("a1", 1), ("a2", 1), ("a3", 1), ("p1", 1), ("p2", 1)),
        finished=("a1", "a2", "p1"),
        engine=(
            _set("a1", "a2", "p1"),
            _set("a2", "p1", "p2"),
            _set("p1", "p2", "a3"),
            _set("p2", "a3"),
        ),
    ),
    "bulk under its width still waits while people fill the room": Case(
        room=2,
        full=2,
        submitted=(("p1", 1), ("p2", 1), ("a1", 1)),
        finished=("p1",),
        engine=(_set("p1", "p2"), _set("p2", "a1")),
    ),
    "bulk waits fair per key within the room": Case(
        room=3,
        full=2,
        submitted=(("a1", 1), ("a2", 1), ("a3", 1), ("b1", 1), ("b2", 1)),
        finished=("a1", "a2", "b1"),
        engine=(_set("a1", "a2"), _set("a2", "b1"), _set("b1", "a3"), _set("a3", "b2")),
    ),
    "a call wider than the room goes into an empty engine, and alone": Case(
        room=2,
        full=2,
        submitted=(("p1", 1), ("p2", 4), ("p3", 1)),
        finished=("p1", "p2"),
        engine=(_set("p1"), _set("p2"), _set("p3")),
    ),
    "no room set: people go straight in": Case(
        room=0,
        full=1,
        submitted=(("p1", 1), ("p2", 1), ("p3", 1), ("a1", 1), ("a2", 1)),
        finished=("a1",),
        engine=(_set("p1", "p2", "p3", "a1"), _set("p1", "p2", "p3", "a2")),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_the_engine_is_handed_at_most_its_room(case: Case) -> None:
    gate = BulkGate(WidthRule(BulkWidthSettings(), case.full, Clock()), room=case.room)
    held = Held(gate)
    for name, seqs in case.submitted:
        held.submit(name, not name.startswith("p"), None if name.startswith("p") else name[0], seqs)
        await held.settle()
    ended: set[str] = set()
    seen = [set(held.started)]
    for name in case.finished:
        held.finish(name)
        ended.add(name)
        await held.settle()
        seen.append(set(held.started) - ended)
    await held.stop()
    assert seen == [set(each) for each in case.engine]
    assert gate.people == 0 and gate.bulk == 0 and gate.people_waiting() == 0 and gate.waiting() == 0


async def test_a_person_who_leaves_while_queued_takes_no_room_with_them() -> None:
    gate = BulkGate(WidthRule(BulkWidthSettings(), 2, Clock()), room=1)
    held = Held(gate)
    for name in ("p1", "p2", "p3"):
        held.submit(name, False, None)
    await held.settle()
    assert held.started == ["p1"] and gate.people_waiting() == 2
    next(t for t in held.tasks if t.get_name() == "p2").cancel()
    held.finish("p1")  # the same turn: room frees while the cancelled waiter is still queued
    await held.settle()
    assert held.started == ["p1", "p3"] and gate.people == 1 and gate.people_waiting() == 0
    await held.stop()
    assert gate.people == 0


async def test_a_bulk_call_a_person_joins_while_queued_waits_with_the_people() -> None:
    import asyncio

    gate = BulkGate(WidthRule(BulkWidthSettings(), 1, Clock()), room=2)
    held = Held(gate)
    held.submit("a1", True, "a")
    held.submit("p1", False, None)
    await held.settle()
    raised = asyncio.Event()
    started: list[str] = []

    async def joined() -> None:
        async with gate.place(True, "a", 1, raised):
            started.append("a2")

    task = asyncio.create_task(joined())
    held.submit("p2", False, None)
    await held.settle()
    assert gate.waiting() == 1 and gate.people_waiting() == 1
    raised.set()  # a person joined a2: it leaves the bulk queue for the people's, behind p2
    await held.settle()
    assert gate.waiting() == 0 and gate.people_waiting() == 2
    held.finish("p1")
    await held.settle()
    assert held.started[-1] == "p2" and started == []
    held.finish("a1")
    await held.settle()
    assert started == ["a2"]
    await task
    await held.stop()

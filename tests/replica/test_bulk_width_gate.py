"""The bulk width's queue on a real event loop and a fake clock: who goes into the engine, and when."""

from __future__ import annotations

import asyncio

from hunyuan_serve.config.width import BulkWidthSettings
from hunyuan_serve.replica.bulk_gate import BulkGate
from hunyuan_serve.replica.bulk_width import WidthRule
from tests.replica.test_bulk_width import CPU, GPU, STEEP, Clock


class Held:
    """Engine calls held open until released: the gate counts them as running until they end."""

    def __init__(self, gate: BulkGate) -> None:
        self.gate = gate
        self.started: list[str] = []
        self._release: dict[str, asyncio.Event] = {}
        self.tasks: list[asyncio.Task[None]] = []

    def submit(self, name: str, bulk: bool, key: str | None, seqs: int = 1) -> None:
        release = self._release[name] = asyncio.Event()

        async def call() -> None:
            async with self.gate.place(bulk, key, seqs):
                self.started.append(name)
                await release.wait()

        self.tasks.append(asyncio.create_task(call(), name=name))

    def finish(self, name: str) -> None:
        self._release[name].set()

    async def settle(self) -> None:
        for _ in range(5):  # a few turns of the loop: grants, starts and ends all run
            await asyncio.sleep(0)


def gate_of(clock: Clock, full: int = 192, **settings: float) -> BulkGate:
    gate = BulkGate(WidthRule(BulkWidthSettings(**settings), full, clock))
    gate.model = STEEP  # a person narrows bulk to its floor, bulk_width_min (4)
    return gate


async def test_a_person_arrives_bulk_over_the_width_waits_and_the_width_returns_after_the_window() -> None:
    clock = Clock()
    gate = gate_of(clock)
    held = Held(gate)
    for n in range(6):
        held.submit(f"b{n}", True, "ci")
    await held.settle()
    assert len(held.started) == 6 and gate.width() == 192  # nobody waiting: full
    held.submit("person", False, None)
    await held.settle()
    assert held.started[-1] == "person" and gate.width() == 4  # the person went straight in
    for n in range(6, 10):
        held.submit(f"b{n}", True, "ci")
    await held.settle()
    assert gate.bulk == 6 and gate.waiting() == 4  # over the width: queued here, not in the engine
    held.finish("b0")
    held.finish("b1")
    held.finish("person")
    await held.settle()
    assert gate.bulk == 4 and gate.waiting() == 4 and gate.people == 0  # still within the window
    clock.now += 5.1  # the window passed: the next event (a step) lets the queue in
    gate.observe(4, 0.01)
    await held.settle()
    assert gate.width() == 192 and gate.bulk == 8 and gate.waiting() == 0
    for task in held.tasks:
        task.cancel()
    await asyncio.gather(*held.tasks, return_exceptions=True)
    assert gate.bulk == 0 and gate.bulk_by_key == {}


async def test_two_keys_share_the_narrow_width_whoever_asked_first() -> None:
    clock = Clock()
    gate = gate_of(clock)
    held = Held(gate)
    held.submit("person", False, None)
    await held.settle()
    for n in range(8):
        held.submit(f"a{n}", True, "ci-a")
    await held.settle()
    for n in range(8):
        held.submit(f"b{n}", True, "ci-b")
    await held.settle()
    assert gate.bulk_by_key == {"ci-a": 4}  # a came first and filled the width
    for n in range(4):  # each of a's calls that ends hands its place on, to b while b holds fewer
        held.finish(f"a{n}")
        await held.settle()
    assert gate.bulk_by_key == {"ci-a": 2, "ci-b": 2}
    held.finish("b0")
    held.finish("a4")
    await held.settle()
    assert gate.bulk_by_key == {"ci-a": 2, "ci-b": 2}
    for task in held.tasks:
        task.cancel()
    await asyncio.gather(*held.tasks, return_exceptions=True)


async def test_a_caller_that_leaves_while_queued_takes_no_place_with_it() -> None:
    clock = Clock()
    gate = gate_of(clock)
    held = Held(gate)
    held.submit("person", False, None)
    for n in range(6):
        held.submit(f"b{n}", True, "ci")
    await held.settle()
    assert gate.bulk == 4 and gate.waiting() == 2
    queued = next(t for t in held.tasks if t.get_name() == "b4")
    queued.cancel()
    held.finish("b0")  # the same turn: a place frees while the cancelled waiter is still queued
    await held.settle()
    assert gate.bulk == 4 and gate.waiting() == 0 and "b4" not in held.started and "b5" in held.started
    for task in held.tasks:
        task.cancel()
    await asyncio.gather(*held.tasks, return_exceptions=True)
    assert gate.bulk == 0 and gate.people == 0


async def test_a_call_wider_than_the_width_still_goes_in_alone() -> None:
    clock = Clock()
    gate = gate_of(clock)
    held = Held(gate)
    held.submit("person", False, None)
    held.submit("ensemble", True, "ci", seqs=8)  # n = 8 samples, width 4
    held.submit("next", True, "ci")
    await held.settle()
    assert held.started == ["person", "ensemble"] and gate.bulk == 8
    held.finish("ensemble")
    await held.settle()
    assert held.started[-1] == "next"
    for task in held.tasks:
        task.cancel()
    await asyncio.gather(*held.tasks, return_exceptions=True)


async def test_on_a_flat_engine_a_person_leaves_bulk_its_full_width() -> None:
    clock = Clock()
    gate = gate_of(clock, full=16)
    gate.model = GPU
    held = Held(gate)
    held.submit("person", False, None)
    for n in range(20):
        held.submit(f"b{n}", True, "ci")
    await held.settle()
    assert gate.width() == 16 and gate.bulk == 16 and gate.waiting() == 4
    gate.model = CPU  # the same rule on a CPU's line: 46 places, so full (16) still
    assert gate.width() == 16
    gate.model = STEEP
    held.finish("b0")
    await held.settle()
    assert gate.width() == 4 and gate.bulk == 15 and gate.waiting() == 4  # no place under the floor
    for task in held.tasks:
        task.cancel()
    await asyncio.gather(*held.tasks, return_exceptions=True)
    assert gate.bulk == 0 and gate.waiting() == 0


async def test_the_window_timer_lets_the_queue_in_without_any_other_event() -> None:
    gate = BulkGate(WidthRule(BulkWidthSettings(interactive_window_s=0.05), 192))
    gate.model = STEEP
    held = Held(gate)
    held.submit("person", False, None)
    for n in range(6):
        held.submit(f"b{n}", True, "ci")
    await held.settle()
    held.finish("person")
    await held.settle()
    assert gate.waiting() == 2
    for _ in range(200):  # the real clock: the gate's own timer fires once the window passes
        if gate.waiting() == 0:
            break
        await asyncio.sleep(0.01)
    assert gate.waiting() == 0 and gate.bulk == 6
    for task in held.tasks:
        task.cancel()
    await asyncio.gather(*held.tasks, return_exceptions=True)

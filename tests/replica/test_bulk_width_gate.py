"""The bulk width's gate on a real event loop and a fake clock: who goes into the engine, and which
width it hands the engine's scheduler."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable

from hunyuan_serve.config.width import BulkWidthSettings
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.admission.bulk_width import WidthRule
from hunyuan_serve.replica.admission.engine_room import BulkGate
from hunyuan_serve.replica.admission.gated_engine import BULK_PRIORITY, GatedEngine
from hunyuan_serve.replica.engine.interface import Delta, EngineStats, Generation, Sampling
from tests.replica.test_bulk_width import Clock


class Held:
    """Engine calls held open until released: the gate counts them as running until they end."""

    def __init__(self, gate: BulkGate) -> None:
        self.gate = gate
        self.started: list[str] = []
        self._release: dict[str, asyncio.Event] = {}
        self.paces: dict[str, tuple[float, int]] = {}  # a person's call: its engine seconds and tokens
        self.tasks: list[asyncio.Task[None]] = []

    def submit(self, name: str, bulk: bool, key: str | None, seqs: int = 1) -> None:
        release = self._release[name] = asyncio.Event()

        async def call() -> None:
            async with self.gate.place(bulk, key, seqs) as placed:
                self.started.append(name)
                await release.wait()
                if name in self.paces:
                    placed.took(*self.paces[name])

        self.tasks.append(asyncio.create_task(call(), name=name))

    def finish(self, name: str, engine_s: float | None = None, tokens: int = 10) -> None:
        if engine_s is not None:
            self.paces[name] = (engine_s, tokens)
        self._release[name].set()

    async def settle(self) -> None:
        for _ in range(5):  # a few turns of the loop: grants, starts and ends all run
            await asyncio.sleep(0)

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


Published = list[tuple[int, int | None]]


def recorder() -> tuple[Published, Callable[[int, int | None], None]]:
    """A list, and a publish that appends each (width, prompt tokens) to it."""
    published: Published = []
    return published, lambda width, prompt_tokens: published.append((width, prompt_tokens))


def gate_of(clock: Clock, full: int = 192, **settings: float) -> tuple[BulkGate, Published]:
    """A gate and the widths and prompt tokens it published, in order."""
    published, publish = recorder()
    gate = BulkGate(WidthRule(BulkWidthSettings(**settings), full, clock), publish=publish)
    return gate, published


async def test_a_person_narrows_the_width_their_steps_carry_while_the_job_keeps_its_places() -> None:
    clock = Clock()
    gate, published = gate_of(clock)
    held = Held(gate)
    for n in range(6):
        held.submit(f"b{n}", True, "ci")
    await held.settle()
    assert len(held.started) == 6 and gate.width() == 192 and published == []  # nobody: full
    held.submit("p0", False, None)
    await held.settle()
    assert held.started[-1] == "p0" and published == [(0, 128)]  # no baseline yet: the first call is a probe
    for n in range(6, 10):
        held.submit(f"b{n}", True, "ci")
    await held.settle()
    assert gate.bulk == 10 and gate.waiting() == 0  # the job keeps taking places: none waits here
    held.finish("p0", engine_s=0.1)  # 10 ms a token with nothing beside: the baseline
    await held.settle()
    assert published[-1] == (1, 128) and list(gate.rule.alone) == [0.01]  # then the floor, bulk_width_min
    held.submit("p1", False, None)
    await held.settle()
    held.finish("p1", engine_s=0.11)  # 11 ms a token beside one: within 1.2x, so one more
    await held.settle()
    held.submit("p2", False, None)
    await held.settle()
    held.finish("p2", engine_s=0.2)  # 20 ms beside two: over, so halved
    await held.settle()
    assert published == [(0, 128), (1, 128), (2, 256), (1, 128)]  # new prompts between: as wide
    clock.now += 5.1  # the window passed: the next publish is full
    held.submit("b10", True, "ci")
    await held.settle()
    assert gate.width() == 192
    await held.stop()
    assert gate.bulk == 0 and gate.bulk_by_key == {} and gate.people == 0


async def test_two_keys_share_the_full_width_whoever_asked_first() -> None:
    gate, _ = gate_of(Clock(), full=4)
    held = Held(gate)
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
    await held.stop()


async def test_a_caller_that_leaves_while_queued_takes_no_place_with_it() -> None:
    gate, _ = gate_of(Clock(), full=4)
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
    await held.stop()
    assert gate.bulk == 0 and gate.people == 0 and gate.rule.probing == 0


async def test_a_call_wider_than_the_width_still_goes_in_alone() -> None:
    gate, _ = gate_of(Clock(), full=4)
    held = Held(gate)
    held.submit("ensemble", True, "ci", seqs=8)  # n = 8 samples, full width 4
    held.submit("next", True, "ci")
    await held.settle()
    assert held.started == ["ensemble"] and gate.bulk == 8
    held.finish("ensemble")
    await held.settle()
    assert held.started[-1] == "next"
    await held.stop()


async def test_the_window_timer_publishes_the_full_width_without_any_other_event() -> None:
    published, publish = recorder()
    gate = BulkGate(WidthRule(BulkWidthSettings(interactive_window_s=0.05), 192), publish=publish)
    held = Held(gate)
    held.submit("person", False, None)
    await held.settle()
    held.finish("person", engine_s=0.1)
    await held.settle()
    assert published == [(0, 128), (1, 128)]
    for _ in range(200):  # the real clock: the gate's own timer fires once the window passes
        if published[-1][0] == 192:
            break
        await asyncio.sleep(0.01)
    assert published == [(0, 128), (1, 128), (192, None)]  # full: any prompts
    await held.stop()


class Timed:
    """An engine whose every call took 0.1 s for 10 tokens (the parts of Engine the gated one uses)."""

    def __init__(self) -> None:
        self.stats = EngineStats()

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        return Generation("x", 3, 10, "length", engine_s=0.1)

    async def stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> AsyncGenerator[Delta, None]:
        yield Delta("x")
        yield Delta("", final=await self.generate(prompt, sampling, request_id, priority))


async def test_the_gated_engine_reports_a_persons_pace_and_hands_the_width_to_the_engine() -> None:
    engine = Timed()
    applied, apply = recorder()
    gated = GatedEngine(engine, gate_of(Clock())[0])  # type: ignore[arg-type]
    engine.stats.apply_bulk_width = apply  # as VllmEngine sets it once built
    prompt = Prompt(text="Hello")
    sampling = Sampling(temperature=0.0, top_p=1.0, top_k=-1, repetition_penalty=1.0, max_tokens=8)
    await gated.generate(prompt, sampling, "p0", 0)
    assert applied == [(0, 128), (1, 128)] and list(gated.gate.rule.alone) == [0.01]  # a probe first
    priority.KEY.set("ci")
    await gated.generate(prompt, sampling, "b0", BULK_PRIORITY)
    assert list(gated.gate.rule.alone) == [0.01] and gated.gate.bulk == 0  # bulk calls teach nothing
    deltas = [d async for d in gated.stream(prompt, sampling, "p1", 0)]
    assert deltas[-1].final is not None and list(gated.gate.rule.alone) == [0.01, 0.01]  # the engine idle

"""The bulk width on the real vLLM engine (tiny checkpoint, CPU): what each step of vLLM's carries."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hunyuan_serve.config import EngineConfig
from hunyuan_serve.config.width import BulkWidthSettings
from hunyuan_serve.families.build import probe_prompt
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.admission.gated_engine import BULK_PRIORITY, GatedEngine, bulk_gate
from hunyuan_serve.replica.engine.interface import Sampling
from hunyuan_serve.replica.engine.vllm_engine import VllmEngine
from hunyuan_serve.replica.engine.width_file import UNLIMITED, WidthReader

pytestmark = pytest.mark.engine

MAX_NUM_SEQS = 32  # full width 24: the interactive reserve's quarter stays free for people
BULK = 96  # four times the full width: some always waits in the replica, and the job outlasts the person
SAMPLING = Sampling(temperature=0.0, top_p=1.0, top_k=-1, repetition_penalty=1.0, max_tokens=24)
PERSON_STRINGS = 6
PERSON = Sampling(temperature=0.0, top_p=1.0, top_k=-1, repetition_penalty=1.0, max_tokens=4)
WIDTH_FLOOR = 2
# New bulk prompt tokens per width a step without the person may read: 2 to 3 of the job's 37-token
# prompts at the floor, where the job's steps at full width read 24.
PROMPT_TOKENS = 16


@dataclass
class Step:
    """One engine step, from the outputs vLLM's engine core sent for it."""

    people: int  # the person's requests that got a token in it
    bulk: int  # bulk requests that got a token in it
    bulk_held: int  # bulk requests vLLM held, scheduled once at least and not finished (paused or not)
    width: int  # the width in the file the scheduler reads, as the step's outputs arrived
    prompt_tokens: int  # the new bulk prompt tokens in the file beside it (UNLIMITED: any)
    prompts_read: int  # prompt tokens of the bulk requests whose first token came in this step
    end: float  # the outputs' timestamp, the engine core's clock


@dataclass
class Record:
    steps: list[Step] = field(default_factory=list)
    person_sent: list[str] = field(default_factory=list)
    # The person's strings: when vLLM's scheduler queued each and when it first scheduled it (its
    # QUEUED and SCHEDULED events, the engine core's clock).
    person_times: dict[str, tuple[float, float]] = field(default_factory=dict)
    bulk_tokens: list[int] = field(default_factory=list)  # each bulk answer's tokens
    most_queued: int = 0  # bulk waiting in the replica's gate, at most
    full: int = 0
    longest_prompt: int = 0  # tokens


def _watch(engine: VllmEngine, gated: GatedEngine, record: Record) -> None:
    """Each step as vLLM's frontend pulls its outputs, before it processes them: which of our requests
    got a token, and what vLLM's own request states hold."""
    core = engine._engine.engine_core
    states = engine._engine.output_processor.request_states
    pull = core.get_output_async
    assert engine._width is not None
    width = WidthReader(engine._width.path)
    started: set[str] = set()

    async def watched() -> Any:
        outputs = await pull()
        ours = {rid: str(s.external_req_id) for rid, s in list(states.items())}
        got = [ours.get(o.request_id, "") for o in outputs.outputs if o.new_token_ids]
        if got:
            held = sum(
                1
                for s in list(states.values())
                if engine._live.get(str(s.external_req_id)) == BULK_PRIORITY and s.stats.scheduled_ts
            )
            people = sum(r.startswith("person-") for r in got)
            bulk = sum(r.startswith("bulk-") for r in got)
            first = [o.request_id for o in outputs.outputs if o.new_token_ids and ours.get(o.request_id, "")
                     .startswith("bulk-") and o.request_id not in started]  # fmt: skip
            started.update(first)
            lengths = [states[rid].prompt_len for rid in first if rid in states]
            record.longest_prompt = max([record.longest_prompt, *lengths])
            limits = width.read()
            record.steps.append(Step(people, bulk, held, *limits, sum(lengths), outputs.timestamp))
        for s in list(states.values()):
            rid = str(s.external_req_id)
            if rid.startswith("person-") and s.stats.scheduled_ts and rid not in record.person_times:
                record.person_times[rid] = (s.stats.queued_ts, s.stats.scheduled_ts)
        record.most_queued = max(record.most_queued, gated.gate.waiting())
        return outputs

    core.get_output_async = watched


async def _person(gated: GatedEngine, record: Record, prompt: Any) -> None:
    for turn in range(PERSON_STRINGS):
        rid = f"person-{turn}"
        record.person_sent.append(rid)
        await gated.generate(prompt, PERSON, rid, priority.ENGINE_PRIORITY[priority.INTERACTIVE])
        await asyncio.sleep(0.02)


async def _scenario(model: Path) -> Record:
    cfg = EngineConfig(
        model=str(model), device="cpu", dtype="float32", max_model_len=512,
        kv_cache_memory_bytes=64 * 2**20, enforce_eager=True, max_num_seqs=MAX_NUM_SEQS,
    )  # fmt: skip
    engine = VllmEngine(cfg, str(model), ignore_eos=True, device="cpu")
    await engine.start()
    record = Record()
    try:
        # A window longer than the scenario: once the person came, the width is theirs to the end.
        settings = BulkWidthSettings(
            interactive_window_s=600, bulk_width_min=WIDTH_FLOOR, narrow_prompt_tokens=PROMPT_TOKENS
        )
        gated = GatedEngine(engine, bulk_gate(settings, MAX_NUM_SEQS, 0.25, {}))
        record.full = gated.gate.rule.full
        prompt = probe_prompt("hunyuan-mt", "Save the file before you close it.")
        bulk_id = iter(range(10**6))

        async def bulk() -> None:
            priority.KEY.set("ci")
            answer = await gated.generate(prompt, SAMPLING, f"bulk-{next(bulk_id)}", BULK_PRIORITY)
            record.bulk_tokens.append(answer.output_tokens)

        await asyncio.gather(*(bulk() for _ in range(8)))  # warm: the engine's first steps are slow
        record.bulk_tokens.clear()
        _watch(engine, gated, record)
        jobs = [asyncio.create_task(bulk()) for _ in range(BULK)]
        while max((s.bulk for s in record.steps), default=0) < record.full:  # the job runs at full width
            await asyncio.sleep(0.005)
        await asyncio.gather(_person(gated, record, prompt), *jobs)
    finally:
        engine.shutdown()
    return record


@pytest.fixture(scope="module")
def record(tiny_model_dir: Path) -> Iterator[Record]:
    saved = dict(os.environ)  # the in-process engine sets vLLM's CPU variables; later tests must not see them
    os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
    try:
        yield asyncio.run(_scenario(tiny_model_dir))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_a_step_that_carries_a_person_carries_no_more_bulk_than_the_width(record: Record) -> None:
    with_people = [(n, s) for n, s in enumerate(record.steps) if s.people]
    carried = [(s.bulk, s.bulk_held, s.width) for _, s in with_people]
    print(f"steps with the person (bulk carried, bulk held, width): {carried}")
    assert with_people and record.full == MAX_NUM_SEQS - MAX_NUM_SEQS // 4
    for n, step in with_people:
        # The scheduler read the width before the step ran; the file may have moved once since.
        allowed = max(step.width, record.steps[n - 1].width if n else step.width)
        assert step.bulk <= allowed <= record.full, (n, step)
    # Paused, not gone: vLLM held more bulk than such a step carried.
    assert any(s.bulk_held > s.bulk for _, s in with_people)
    # The first string is a probe (width 0: the person's pace alone); the next at the floor.
    assert with_people[0][1].bulk == 0


def test_between_the_persons_strings_the_job_runs_at_full_width(record: Record) -> None:
    without = [s.bulk for s in record.steps if not s.people]
    assert max(without) > WIDTH_FLOOR and max(without) <= record.full, without
    assert record.most_queued > 0  # the job's surplus over the full width waited in the replica


def test_between_the_persons_strings_new_bulk_prompts_start_a_few_at_a_time(record: Record) -> None:
    # While the width is narrow, a step without the person reads at most the file's prompt tokens of
    # new bulk prompts (and the rest of one it began in the step before), where the job's first step,
    # at full width, read all its prompts at once.
    def bound(n: int) -> int:
        caps = [s.prompt_tokens for s in record.steps[max(0, n - 1) : n + 1]]  # the file may move once
        return max(caps) + record.longest_prompt

    narrow = [(n, s) for n, s in enumerate(record.steps) if not s.people and s.prompt_tokens != UNLIMITED]
    print(f"prompt tokens read per step without the person, narrow: {[s.prompts_read for _, s in narrow]}")
    assert narrow and all(s.prompts_read <= bound(n) for n, s in narrow if record.steps[n - 1].prompt_tokens
                          != UNLIMITED), [(s.prompts_read, bound(n)) for n, s in narrow]  # fmt: skip
    assert sum(s.prompts_read > 0 for _, s in narrow) > 1  # the job went on starting prompts meanwhile
    burst = max(s.prompts_read for s in record.steps if s.prompt_tokens == UNLIMITED)
    assert burst > max(s.prompt_tokens for _, s in narrow) + record.longest_prompt


def test_paused_bulk_loses_nothing(record: Record) -> None:
    # Every answer of the job came back whole: a pause keeps the request and its KV cache in vLLM.
    assert record.bulk_tokens == [SAMPLING.max_tokens] * BULK


def test_each_persons_string_is_in_the_first_step_after_it_reaches_the_scheduler(record: Record) -> None:
    # Counted on the engine core's own clock: the steps that ended between vLLM's scheduler queueing
    # the string (QUEUED) and first scheduling it (SCHEDULED). The core takes new requests in between
    # steps and (on a CPU) schedules synchronously, so 0 means the very next step carried it.
    assert sorted(record.person_times) == sorted(record.person_sent)
    assert len(record.person_sent) == PERSON_STRINGS
    ends = [s.end for s in record.steps]
    waited = {
        rid: sum(queued < end < scheduled for end in ends)
        for rid, (queued, scheduled) in record.person_times.items()
    }
    print(f"steps waited per string: {waited}; steps seen: {len(ends)}")
    assert waited == dict.fromkeys(record.person_sent, 0)

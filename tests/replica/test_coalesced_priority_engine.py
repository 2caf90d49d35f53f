"""Identical requests of two classes share one engine call, at the higher class (tiny checkpoint, CPU)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hunyuan_serve.cache.layers import TranslationCache
from hunyuan_serve.config import EngineConfig, ReplicaConfig
from hunyuan_serve.config.width import BulkWidthSettings
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.languages import find_language
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.admission.gated_engine import GatedEngine, bulk_gate
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from hunyuan_serve.replica.engine.vllm_engine import VllmEngine
from hunyuan_serve.replica.metrics import Metrics
from hunyuan_serve.replica.outcome import Outcome
from hunyuan_serve.replica.review import Review
from hunyuan_serve.replica.schema import TranslateRequest
from hunyuan_serve.replica.service import Translator

pytestmark = pytest.mark.engine

MAX_NUM_SEQS = 4  # a full width of 3 bulk calls: the job's others wait in the replica's gate
JOB = 7  # three run, four wait; the person's string is the job's last
LONG = Sampling(temperature=0.0, top_p=1.0, top_k=-1, repetition_penalty=1.0, max_tokens=300)
SHORT = Sampling(temperature=0.0, top_p=1.0, top_k=-1, repetition_penalty=1.0, max_tokens=8)
SHARED_TEXT = "Close the window"


def _request(text: str, sampling: Sampling) -> TranslateRequest:
    return TranslateRequest((text,), False, find_language("en"), find_language("zh"), sampling)


def _bulk(request_id: str) -> priority.Caller:
    return priority.Caller(request_id, priority.BULK, "ci")


async def test_a_persons_string_that_a_queued_bulk_job_asked_for_is_served_at_interactive_priority(
    tiny_model_dir: Path,
) -> None:
    cfg = EngineConfig(
        model=str(tiny_model_dir), device="cpu", dtype="float32", max_model_len=512,
        kv_cache_memory_bytes=64 * 2**20, enforce_eager=True, max_num_seqs=MAX_NUM_SEQS,
    )  # fmt: skip
    engine = VllmEngine(cfg, str(tiny_model_dir), ignore_eos=True, device="cpu")  # each costs max_tokens
    await engine.start()
    seen: dict[str, int] = {}  # engine request id -> the priority vLLM got it with
    generate = engine.generate

    async def recorded(prompt: Prompt, sampling: Sampling, request_id: str, level: int = 0) -> Generation:
        seen[request_id] = level
        return await generate(prompt, sampling, request_id, level)

    engine.generate = recorded  # type: ignore[method-assign]
    try:
        rcfg = ReplicaConfig(cache_entries=0, qa="off")
        metrics = Metrics(engine, in_flight=lambda: 0)
        gate = bulk_gate(BulkWidthSettings(), MAX_NUM_SEQS, rcfg.interactive_reserve, {})
        translator = Translator(
            GatedEngine(engine, gate), "hunyuan-mt", TranslationCache.from_config(rcfg, metrics), metrics,
            Review(rcfg, metrics),
        )  # fmt: skip
        job = [
            asyncio.create_task(translator.translate(_request(f"Job string {i}", LONG), _bulk(f"b{i}")))
            for i in range(JOB - 1)
        ]
        job.append(asyncio.create_task(translator.translate(_request(SHARED_TEXT, SHORT), _bulk("b-shared"))))
        for _ in range(1000):  # bounded: 10 s, until the job's last string waits in the gate
            if gate.waiting() == JOB - gate.rule.full:
                break
            await asyncio.sleep(0.01)
        assert gate.bulk == gate.rule.full and gate.waiting() == JOB - gate.rule.full
        person = priority.Caller("person", priority.INTERACTIVE)
        answer: Outcome = await translator.translate(_request(SHARED_TEXT, SHORT), person)
        # Answered while the job's first calls, 300 tokens each, still run: the shared call did not wait
        # for one of their places (as bulk it would have, behind three more of the job's).
        running = [task for task in job[: gate.rule.full] if not task.done()]
        assert len(running) == gate.rule.full
        bulk_answer = await job[-1]
        # The rest of the job proves nothing more: cancelled, its calls are aborted in the engine instead
        # of decoding 300 tokens each, three at a time (most of this test's time past the engine's start).
        for task in job[:-1]:
            task.cancel()
        await asyncio.gather(*job, return_exceptions=True)
    finally:
        engine.shutdown()
    [shared_id] = [rid for rid in seen if rid.startswith("b-shared-")]
    assert seen[shared_id] == priority.ENGINE_PRIORITY[priority.INTERACTIVE]  # one call, raised
    assert not any(rid.startswith("person-") for rid in seen)  # the person's request joined it
    assert answer.results == bulk_answer.results and answer.output_tokens == SHORT.max_tokens
    job_levels = {level for rid, level in seen.items() if rid.startswith("b") and rid != shared_id}
    assert job_levels == {priority.ENGINE_PRIORITY[priority.BULK]}
    assert metrics.coalesced._value.get() == 1

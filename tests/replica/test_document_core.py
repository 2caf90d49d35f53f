"""A document job's service (replica/documents/core.py): the replica's translation core called in-process
from a worker thread's loop, as bulk work of the job's key, billed, under the deadline, refusals with
the statuses native /translate answers. The scripted engine of tests/support/replica_fakes.py."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hunyuan_serve import auth
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.families import HY_MT15
from hunyuan_serve.localization.answers import TranslateError
from hunyuan_serve.localization.localize import localize
from hunyuan_serve.replica.admission.priority import BULK, ENGINE_PRIORITY
from hunyuan_serve.replica.app import build_replica
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.documents.core import CoreService
from tests.support.replica_fakes import FakeEngine, wait_until

KEY = "sk-document-core-5e4d3c2b1a"
LIMIT = 1000  # characters the key may have translated


@dataclass
class Replica:
    engine: FakeEngine
    context: ReplicaContext
    loop: asyncio.AbstractEventLoop  # the replica's, in a thread of its own as Uvicorn's would be
    owner: str

    def service(self, batch_size: int = 2, concurrency: int = 2) -> CoreService:
        return CoreService(self.context, self.loop, self.owner, "JOB1", batch_size, concurrency)

    def on_replica(self, work: object) -> object:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(10)  # type: ignore[arg-type]


@pytest.fixture
def replica(tmp_path: Path) -> Iterator[Replica]:
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{KEY} limit={LIMIT}\n")
    cfg = ServeConfig.model_validate(
        {
            "replica": {
                "cache_entries": 0,
                "request_timeout_s": 1.0,
                "store_path": str(tmp_path / "store.sqlite"),
                "qa": "off",
            },
            "auth": {"keys_file": str(keys)},
        }
    )
    engine = FakeEngine(max_model_len=400)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    context = build_replica(engine, cfg, HY_MT15)
    try:
        yield Replica(engine, context, loop, auth.key_id(KEY))
    finally:
        for closing in (context.cache.aclose(), context.store.aclose(), context.recall.store.aclose()):
            asyncio.run_coroutine_threadsafe(closing, loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        context.documents.close()


def test_a_batch_is_bulk_work_of_the_key_answered_and_billed(replica: Replica) -> None:
    texts = ["Good morning.", "The printer is out of paper."]
    answers = asyncio.run(replica.service().translate_texts(texts, "de", "en"))
    # The scripted engine answers each prompt's length: the core's own prompts, one per text.
    assert [a.text for a in answers] == texts
    assert all(a.result.startswith("<") and not a.cached and a.qa is None for a in answers)
    assert replica.engine.priorities == [ENGINE_PRIORITY[BULK]] * 2
    used = replica.on_replica(replica.context.store.characters(replica.owner))
    assert used == sum(map(len, texts))


def test_past_the_keys_limit_is_refused_as_the_route_refuses_it(replica: Replica) -> None:
    with pytest.raises(TranslateError) as refused:
        asyncio.run(replica.service().translate_texts(["x" * (LIMIT + 1)], "de", "en"))
    assert (refused.value.status, refused.value.code) == (429, "quota_exceeded")
    assert replica.engine.calls == 0


def test_a_text_too_long_is_a_413_for_that_batch(replica: Replica) -> None:
    service = replica.service()
    with pytest.raises(TranslateError) as refused:
        asyncio.run(service.translate_texts(["x" * 450], "de", "en"))
    assert (refused.value.status, refused.value.code) == (413, "text_too_long")
    assert service.unanswered is None  # the input's fault: the segment fails, the job goes on


def test_past_the_deadline_is_a_504_and_the_engine_call_is_aborted(replica: Replica) -> None:
    replica.engine.hold()
    try:
        service = replica.service()
        with pytest.raises(TranslateError) as late:
            asyncio.run(service.translate_texts(["Hello."], "de", "en"))
        assert (late.value.status, late.value.code) == (504, "deadline_exceeded")
        assert service.unanswered is late.value  # the job is left to its lease, not failed
        wait_until(lambda: len(replica.engine.aborted) == 1, what="the engine call aborted")
    finally:
        replica.engine.let_go()


def test_a_job_cancelled_in_its_thread_aborts_its_calls_on_the_replica(replica: Replica) -> None:
    replica.engine.hold()

    async def cancelled() -> None:
        call = asyncio.ensure_future(replica.service().translate_texts(["Hello.", "World."], "de", "en"))
        while len(replica.engine.running) < 2:
            await asyncio.sleep(0.01)
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)

    try:
        asyncio.run(cancelled())
        wait_until(lambda: len(replica.engine.aborted) == 2, what="both engine calls aborted")
    finally:
        replica.engine.let_go()


def test_localize_runs_a_document_through_it_in_batches(replica: Replica) -> None:
    segments = [f"Line {n} of the report." for n in range(5)]
    service = replica.service(batch_size=2, concurrency=2)
    texts, summary = asyncio.run(localize(segments, [str(n) for n in range(5)], service, "de", "en"))
    assert summary.requests == 3 and summary.translated + summary.failed == 5 and len(texts) == 5
    assert replica.engine.calls == 5 and set(replica.engine.priorities) == {ENGINE_PRIORITY[BULK]}

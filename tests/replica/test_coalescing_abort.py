"""A request that joins a text while the only other request for it is leaving gets an answer of its own."""

from __future__ import annotations

import asyncio

from hunyuan_serve.cache.layers import TranslationCache
from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.languages import find_language
from hunyuan_serve.replica.admission.priority import Caller
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from hunyuan_serve.replica.metrics import Metrics
from hunyuan_serve.replica.schema import TranslateRequest
from hunyuan_serve.replica.service import Translator
from tests.support.replica_fakes import FakeEngine, gated


class SlowAbortEngine(FakeEngine):
    """An engine whose cancelled call stays in its abort until the test lets it end (vLLM's abort is awaited
    in its cleanup), so the test knows the abort is under way, and still is, when the second request comes."""

    def __init__(self) -> None:
        super().__init__()
        self.aborting = asyncio.Event()
        self.abort_may_end = asyncio.Event()

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        try:
            return await super().generate(prompt, sampling, request_id, priority)
        except asyncio.CancelledError:
            self.aborting.set()
            await self.abort_may_end.wait()  # the abort's round trip, while the call is still in the table
            raise


def _request(text: str) -> TranslateRequest:
    sampling = Sampling(max_tokens=8, temperature=0.0, top_p=1.0, top_k=-1, repetition_penalty=1.0)
    return TranslateRequest((text,), False, find_language("en"), find_language("zh"), sampling)


async def test_a_request_arriving_during_the_abort_starts_its_own_call() -> None:
    engine = SlowAbortEngine()
    engine.hold()
    cfg = ReplicaConfig(cache_entries=0)
    metrics = Metrics(engine, in_flight=lambda: 0)
    translator = Translator(gated(engine), "hunyuan-mt", TranslationCache.from_config(cfg, metrics), metrics)
    first = asyncio.create_task(translator.translate(_request("Open the door"), Caller("a")))
    for _ in range(500):  # bounded: until the first call is running in the engine
        if engine.running or first.done():
            break
        await asyncio.sleep(0.01)
    assert engine.running, first
    first.cancel()  # its client left: the call it alone waited for is aborted
    await asyncio.wait_for(engine.aborting.wait(), 5)
    engine.let_go()
    # The first call is still in its abort (held open until abort_may_end): the second request is answered
    # within it, which only a call of its own can do; one that joined the leaving call would wait on it.
    second = await asyncio.wait_for(translator.translate(_request("Open the door"), Caller("b")), 5)
    assert not engine.abort_may_end.is_set() and first.cancelled()
    engine.abort_may_end.set()
    assert second.results == ["<" + str(len(engine.given[-1].messages[0]["content"])) + ">"]
    assert engine.calls == 2 and len(engine.aborted) == 1

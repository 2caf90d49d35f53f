"""A cached answer keeps how the first one ended and what it counted, in each layer; old ones are misses."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hunyuan_serve.cache.entry import ANSWER_FORMAT, CachedAnswer, decode_answer, encode_answer
from hunyuan_serve.cache.layers import TranslationCache
from hunyuan_serve.cache.redis_layer import RedisSettings
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.replica.admission.priority import Caller
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from hunyuan_serve.replica.metrics import Metrics
from hunyuan_serve.replica.service import Translator
from tests.support.redis_server import redis_server
from tests.support.replica_fakes import FakeEngine, gated

SAMPLING = Sampling(max_tokens=3, temperature=0.0, top_p=1.0, top_k=-1, repetition_penalty=1.0)
PROMPT = Prompt(text="English: Open file\nChinese:", stop=("\n",))


class CutOffEngine(FakeEngine):
    """Every answer is cut off at max_tokens: finish_reason "length", with its real counts."""

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        done = await super().generate(prompt, sampling, request_id, priority)
        return Generation(done.text, done.prompt_tokens, sampling.max_tokens, "length")

    async def sample(
        self, prompt: Prompt, sampling: Sampling, request_id: str, n: int, priority: int = 0
    ) -> list[Generation]:
        return [await self.generate(prompt, sampling, f"{request_id}-{i}", priority) for i in range(n)]


def test_an_answer_round_trips_and_older_or_foreign_values_are_misses() -> None:
    answer = CachedAnswer("打开文件", "length", 9, 6)
    value = encode_answer(answer)
    assert decode_answer(value) == answer and "打开文件" in value  # UTF-8 kept as is, not escaped
    assert json.loads(value)["format"] == ANSWER_FORMAT
    fields = {"text": "x", "finish_reason": "stop", "prompt_tokens": 1, "output_tokens": 1}
    for old in (
        "打开文件",  # a plain text: what every entry was before
        '["a", "b"]',  # an ensemble's candidates as they were kept
        '{"text": "x"}',  # an answer that happens to be JSON
        json.dumps({**fields, "format": ANSWER_FORMAT + 1}),
        json.dumps({**fields, "format": ANSWER_FORMAT, "prompt_tokens": -1}),
        json.dumps({**fields, "format": ANSWER_FORMAT, "output_tokens": True}),
        json.dumps({**fields, "format": ANSWER_FORMAT, "text": None}),
        "{not json",
    ):
        assert decode_answer(old) is None, old


@contextlib.contextmanager
def _layer(backend: str, tmp_path: Path) -> Iterator[Callable[[], TranslationCache]]:
    """Caches over one shared layer, each as another replica's (its memory empty)."""
    if backend == "sqlite":
        path = tmp_path / "cache.sqlite"
        yield lambda: TranslationCache(10, path)
        return
    with redis_server(tmp_path) as server:
        settings = RedisSettings(server.url, prefix="answers:")
        yield lambda: TranslationCache(10, redis=settings)


def _translator(cache: TranslationCache) -> tuple[Translator, CutOffEngine]:
    engine = CutOffEngine()
    metrics = Metrics(engine, in_flight=lambda: 0)
    return Translator(gated(engine), "few-shot", cache, metrics), engine


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_a_cached_answer_reports_the_first_ones_finish_and_counts(backend: str, tmp_path: Path) -> None:
    with _layer(backend, tmp_path) as new_cache:
        writer, reader = new_cache(), new_cache()
        (first,) = await _translator(writer)[0].complete([PROMPT], SAMPLING, Caller("r1"))
        await writer.aclose()  # its queued shared write done
        translator, engine = _translator(reader)
        (again,) = await translator.complete([PROMPT], SAMPLING, Caller("r2"))
        await reader.aclose()
    assert not first.cached and first.generation.finish_reason == "length"
    assert first.generation.prompt_tokens > 0 and first.generation.output_tokens == SAMPLING.max_tokens
    assert again.cached and engine.calls == 0  # from the shared layer: the other replica's answer
    got, want = again.generation, first.generation
    assert (got.text, got.finish_reason, got.prompt_tokens, got.output_tokens) == (
        want.text,
        want.finish_reason,
        want.prompt_tokens,
        want.output_tokens,
    )


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_an_entry_from_before_is_answered_again_and_replaced(backend: str, tmp_path: Path) -> None:
    with _layer(backend, tmp_path) as new_cache:
        old, cache, stored = new_cache(), new_cache(), new_cache()
        translator, engine = _translator(cache)
        key = translator._prompt_key(PROMPT, SAMPLING)
        old.put(key, "打开文件")  # as a replica of the previous release wrote it: the text alone
        await old.aclose()
        (answer,) = await translator.complete([PROMPT], SAMPLING, Caller("r1"))
        assert not answer.cached and engine.calls == 1
        assert answer.generation.finish_reason == "length" and answer.generation.output_tokens > 0
        (again,) = await translator.complete([PROMPT], SAMPLING, Caller("r2"))
        await cache.aclose()
        (hit,) = await stored.get_many([key])
        await stored.aclose()
    assert again.cached and engine.calls == 1
    generation = answer.generation
    expected = CachedAnswer(generation.text, "length", generation.prompt_tokens, generation.output_tokens)
    assert hit is not None and decode_answer(hit[0]) == expected

"""An engine whose bulk calls take a place under the bulk width first (the translation core's engine)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from contextlib import AbstractAsyncContextManager

from hunyuan_serve.config.replica import bulk_slots
from hunyuan_serve.config.width import BulkWidthSettings
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.replica import priority
from hunyuan_serve.replica.bulk_gate import BulkGate, Placed
from hunyuan_serve.replica.bulk_width import WidthRule
from hunyuan_serve.replica.engine_types import Delta, Engine, EngineStats, Generation, Sampling

BULK_PRIORITY = priority.ENGINE_PRIORITY[priority.BULK]


def bulk_gate(
    settings: BulkWidthSettings, max_num_seqs: int, reserve: float, weights: Mapping[str | None, int]
) -> BulkGate:
    """The gate of one engine: full width is what it batches less the share kept for people (the
    admission's formula, replica.interactive_reserve), so a person always finds a place in the batch."""
    return BulkGate(WidthRule(settings, bulk_slots(max_num_seqs, reserve)), weights=weights)


class GatedEngine:
    """`engine` behind `gate`: the class (priority) and key of the call decide; the rest passes through.

    A person's calls report their pace to the gate, and the width it learns goes to the engine's
    scheduler (EngineStats.apply_bulk_width), read at each publish: an engine sets it once built."""

    def __init__(self, engine: Engine, gate: BulkGate) -> None:
        self.engine = engine
        self.gate = gate
        gate.publish = self._apply_width

    def _apply_width(self, width: int, prompt_tokens: int | None) -> None:
        apply = self.engine.stats.apply_bulk_width
        if apply is not None:
            apply(width, prompt_tokens)

    @property
    def model(self) -> str:
        return self.engine.model

    @model.setter
    def model(self, value: str) -> None:
        self.engine.model = value

    @property
    def model_name(self) -> str:
        return self.engine.model_name

    @model_name.setter
    def model_name(self, value: str) -> None:
        self.engine.model_name = value

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len

    @max_model_len.setter
    def max_model_len(self, value: int) -> None:
        self.engine.max_model_len = value

    @property
    def stats(self) -> EngineStats:
        return self.engine.stats

    @stats.setter
    def stats(self, value: EngineStats) -> None:
        self.engine.stats = value

    async def start(self) -> None:
        await self.engine.start()

    def count_prompt_tokens(self, prompt: Prompt) -> int:
        return self.engine.count_prompt_tokens(prompt)

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        async with self._place(priority, 1) as call:
            generation = await self.engine.generate(prompt, sampling, request_id, priority)
            call.took(generation.engine_s, generation.output_tokens)
            return generation

    async def sample(
        self, prompt: Prompt, sampling: Sampling, request_id: str, n: int, priority: int = 0
    ) -> list[Generation]:
        async with self._place(priority, n) as call:
            samples = await self.engine.sample(prompt, sampling, request_id, n, priority)
            if samples:  # one engine call: its time, over the longest sample's tokens
                call.took(samples[0].engine_s, max(s.output_tokens for s in samples))
            return samples

    async def stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> AsyncGenerator[Delta, None]:
        async with self._place(priority, 1) as call:
            deltas = self.engine.stream(prompt, sampling, request_id, priority)
            try:
                async for delta in deltas:
                    if delta.final is not None:
                        call.took(delta.final.engine_s, delta.final.output_tokens)
                    yield delta
            finally:
                await deltas.aclose()

    def _place(self, engine_priority: int, seqs: int) -> AbstractAsyncContextManager[Placed]:
        return self.gate.place(engine_priority >= BULK_PRIORITY, priority.KEY.get(), seqs)

    async def abort(self, request_id: str) -> None:
        await self.engine.abort(request_id)

    def is_alive(self) -> bool:
        return self.engine.is_alive()

    def unfinished(self) -> int:
        return self.engine.unfinished()

    def shutdown(self) -> None:
        self.engine.shutdown()

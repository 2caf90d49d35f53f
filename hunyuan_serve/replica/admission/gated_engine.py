"""An engine whose bulk calls take a place under the bulk width first (the translation core's engine)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from hunyuan_serve.config.replica import bulk_slots
from hunyuan_serve.config.width import BulkWidthSettings
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.admission.bulk_width import WidthRule
from hunyuan_serve.replica.admission.engine_room import BulkGate, Placed
from hunyuan_serve.replica.engine.interface import Delta, Engine, EngineStats, Generation, Sampling

BULK_PRIORITY = priority.ENGINE_PRIORITY[priority.BULK]


@dataclass
class Ticket:
    """Whom one engine call is for: its class, the highest of its waiters' (identical requests share
    one call), and the key whose bulk share it counts in. A person joining a bulk call raises it: still
    in the bulk gate's queue, it goes in as a person's call at once, at interactive priority."""

    cls: str = priority.INTERACTIVE
    key: str | None = None
    raised: asyncio.Event = field(default_factory=asyncio.Event)

    def join(self, cls: str) -> None:
        """One more waiter of class `cls`."""
        if cls == priority.INTERACTIVE and self.cls == priority.BULK:
            self.cls = cls
            self.raised.set()

    def engine_priority(self) -> int:
        return priority.ENGINE_PRIORITY[self.cls]


def ticket_of(caller: priority.Caller) -> Ticket:
    return Ticket(caller.cls, caller.key)


def _ticket(given: int | Ticket) -> Ticket:
    """A call given vLLM's priority alone (the Engine protocol's way) has no key."""
    if isinstance(given, Ticket):
        return given
    return Ticket(priority.BULK if given >= BULK_PRIORITY else priority.INTERACTIVE)


def bulk_gate(
    settings: BulkWidthSettings,
    max_num_seqs: int,
    reserve: float,
    weights: Mapping[str | None, int],
    margin: int | None = None,
) -> BulkGate:
    """The gate of one engine: full width is what it batches less the share kept for people (the
    admission's formula, replica.interactive_reserve), so a person always finds a place in the batch;
    the engine is handed what it batches and `margin` more (None: no limit), the rest waits here."""
    room = 0 if margin is None else max_num_seqs + margin
    return BulkGate(WidthRule(settings, bulk_slots(max_num_seqs, reserve)), weights=weights, room=room)


class GatedEngine:
    """`engine` behind `gate`: the call's Ticket (class and key) decides; the rest passes through. A
    bare priority (the Engine protocol's) is a ticket of that class without a key.

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

    # The engine's priority is read once the call has its place: a raised ticket goes in as a person's.
    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int | Ticket = 0
    ) -> Generation:
        ticket = _ticket(priority)
        async with self._place(ticket, 1) as call:
            generation = await self.engine.generate(prompt, sampling, request_id, ticket.engine_priority())
            call.took(generation.engine_s, generation.output_tokens)
            return generation

    async def sample(
        self, prompt: Prompt, sampling: Sampling, request_id: str, n: int, priority: int | Ticket = 0
    ) -> list[Generation]:
        ticket = _ticket(priority)
        async with self._place(ticket, n) as call:
            samples = await self.engine.sample(prompt, sampling, request_id, n, ticket.engine_priority())
            if samples:  # one engine call: its time, over the longest sample's tokens
                call.took(samples[0].engine_s, max(s.output_tokens for s in samples))
            return samples

    async def stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int | Ticket = 0
    ) -> AsyncGenerator[Delta, None]:
        ticket = _ticket(priority)
        async with self._place(ticket, 1) as call:
            deltas = self.engine.stream(prompt, sampling, request_id, ticket.engine_priority())
            try:
                async for delta in deltas:
                    if delta.final is not None:
                        call.took(delta.final.engine_s, delta.final.output_tokens)
                    yield delta
            finally:
                await deltas.aclose()

    def _place(self, ticket: Ticket, seqs: int) -> AbstractAsyncContextManager[Placed]:
        return self.gate.place(ticket.cls == priority.BULK, ticket.key, seqs, ticket.raised)

    async def abort(self, request_id: str) -> None:
        await self.engine.abort(request_id)

    def is_alive(self) -> bool:
        return self.engine.is_alive()

    def unfinished(self) -> int:
        return self.engine.unfinished()

    def shutdown(self) -> None:
        self.engine.shutdown()

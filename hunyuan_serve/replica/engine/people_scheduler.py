"""vLLM's scheduler with the bulk width: a step with a person's sequence carries little bulk, one without
few new bulk prompts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from hunyuan_serve.replica.engine.width_file import UNLIMITED, WidthReader

# The engine config's additional_config key naming the width file (replica/engine/width_file.py).
WIDTH_FILE_KEY = "hunyuan_bulk_width_file"
# vLLM priorities: people's requests are 0, bulk ones 1 (replica/admission/priority.py, ENGINE_PRIORITY).
_PERSON = 0


class _Queued(Protocol):
    priority: int


def person_in(running: Sequence[_Queued], waiting: Sequence[_Queued]) -> bool:
    """Whether a person's request is in the engine, running or waiting."""
    return any(r.priority == _PERSON for r in running) or any(r.priority == _PERSON for r in waiting)


def paused_and_held(
    running: Sequence[_Queued], waiting: Sequence[_Queued], width: int
) -> tuple[list[Any], list[Any]]:
    """The bulk requests this step leaves out while a person's request is in the engine: those past the
    first `width` bulk ones, running first (paused: their KV cache stays, and they go on in the next
    step without a person), then waiting (held: a new prompt's prefill would lengthen the person's
    step). Nothing, with no person in the engine or no width written."""
    if width == UNLIMITED or not person_in(running, waiting):
        return [], []
    bulk = [r for r in running if r.priority != _PERSON]
    room = max(0, width - len(bulk))
    return bulk[width:], [r for r in waiting if r.priority != _PERSON][room:]


def step_budget(budget: int, running: int, prompt_tokens: int) -> int:
    """The tokens a step without a person may schedule: one per running sequence (its next token; a
    prompt still being read takes its share of the rest too) and `prompt_tokens` more, within vLLM's
    own budget."""
    return min(budget, running + prompt_tokens)


class _Pausing:
    """Mixed in before vLLM's Scheduler (or AsyncScheduler): schedule() without the paused and held
    bulk, which go back unchanged once the step is scheduled; or, in a step without a person while the
    width is narrow, with a token budget that starts few new bulk prompts.

    Running requests left out of a step are ordinary in vLLM: a step whose token budget runs out leaves
    the rest of the running list out too, and the model runner keeps their state (gpu_model_runner's
    _update_states: "running requests that are not scheduled in this step"). So a pause recomputes
    nothing, unlike an abort and resubmit, and unlike vLLM's own preemption, which frees the KV cache.
    """

    running: list[Any]
    waiting: Any
    vllm_config: Any
    max_num_scheduled_tokens: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        path = (self.vllm_config.additional_config or {}).get(WIDTH_FILE_KEY)
        self._width = WidthReader(path) if path else None
        if self._width is not None:
            self._width.built()
        # Without chunked prefill, vLLM starts no prompt longer than the step's budget: a prompt limit
        # would keep a long bulk prompt waiting for as long as people are active.
        self._limit_prompts = bool(self.vllm_config.scheduler_config.enable_chunked_prefill)

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        width, prompt_tokens = (UNLIMITED, UNLIMITED) if self._width is None else self._width.read()
        if self._width is not None:
            self._width.acknowledge(width)
        # No width written (the replica's gate has not published one yet): vLLM's own scheduling, and
        # the waiting queue is not copied for nothing.
        if width == UNLIMITED:
            return super().schedule(*args, **kwargs)  # type: ignore[misc]
        waiting = list(self.waiting)
        if person_in(self.running, waiting):
            return self._schedule_beside_people(width, waiting, *args, **kwargs)
        if prompt_tokens == UNLIMITED or not self._limit_prompts:
            return super().schedule(*args, **kwargs)  # type: ignore[misc]
        return self._schedule_within(prompt_tokens, *args, **kwargs)

    def _schedule_beside_people(self, width: int, waiting: list[Any], *args: Any, **kwargs: Any) -> Any:
        paused, held = paused_and_held(self.running, waiting, width)
        left_out = {id(r) for r in paused}
        self.running = [r for r in self.running if id(r) not in left_out]
        self.waiting.remove_requests(held)
        try:
            return super().schedule(*args, **kwargs)  # type: ignore[misc]
        finally:
            self.running = self.running + paused
            for request in held:
                self.waiting.add_request(request)

    def _schedule_within(self, prompt_tokens: int, *args: Any, **kwargs: Any) -> Any:
        """A step with no person's sequence: new prompts within prompt_tokens (vLLM's chunked prefill
        reads the rest of a long one in the next steps)."""
        budget = self.max_num_scheduled_tokens
        self.max_num_scheduled_tokens = step_budget(budget, len(self.running), prompt_tokens)
        try:
            return super().schedule(*args, **kwargs)  # type: ignore[misc]
        finally:
            self.max_num_scheduled_tokens = budget


class _Unpausing(_Pausing):
    """For tests only (args.SCHEDULER_SEAM_ENV): built like the pausing scheduler, scheduling as
    vLLM's own, never reading the width: what a vLLM that stopped calling our schedule() looks like."""

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        return super(_Pausing, self).schedule(*args, **kwargs)  # type: ignore[misc]


def _build(mixin: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`mixin` on the class vLLM itself would pick: AsyncScheduler where async scheduling is on, else
    Scheduler."""
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler

    config = kwargs["vllm_config"] if "vllm_config" in kwargs else args[0]
    base = AsyncScheduler if config.scheduler_config.async_scheduling else Scheduler
    return type(f"{mixin.__name__.strip('_')}{base.__name__}", (mixin, base), {})(*args, **kwargs)


def make(*args: Any, **kwargs: Any) -> Any:
    """The scheduler vLLM's engine core builds (engine arg scheduler_cls)."""
    return _build(_Pausing, args, kwargs)


def make_unpausing(*args: Any, **kwargs: Any) -> Any:
    """The test seam's scheduler (_Unpausing)."""
    return _build(_Unpausing, args, kwargs)

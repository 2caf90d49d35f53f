"""vLLM's scheduler with the bulk width: a step that carries a person's sequence carries little bulk."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from hunyuan_serve.replica.width_file import UNLIMITED, WidthReader

# The engine config's additional_config key naming the width file (replica/width_file.py).
WIDTH_FILE_KEY = "hunyuan_bulk_width_file"
# vLLM priorities: people's requests are 0, bulk ones 1 (replica/priority.py, ENGINE_PRIORITY).
_PERSON = 0


class _Queued(Protocol):
    priority: int


def paused_and_held(
    running: Sequence[_Queued], waiting: Sequence[_Queued], width: int
) -> tuple[list[Any], list[Any]]:
    """The bulk requests this step leaves out while a person's request is in the engine: those past the
    first `width` bulk ones, running first (paused: their KV cache stays, and they go on in the next
    step without a person), then waiting (held: a new prompt's prefill would lengthen the person's
    step). Nothing, with no person in the engine or no width written."""
    person = any(r.priority == _PERSON for r in running) or any(r.priority == _PERSON for r in waiting)
    if width == UNLIMITED or not person:
        return [], []
    bulk = [r for r in running if r.priority != _PERSON]
    room = max(0, width - len(bulk))
    return bulk[width:], [r for r in waiting if r.priority != _PERSON][room:]


class _Pausing:
    """Mixed in before vLLM's Scheduler (or AsyncScheduler): schedule() without the paused and held
    bulk, which go back unchanged once the step is scheduled.

    Running requests left out of a step are ordinary in vLLM: a step whose token budget runs out leaves
    the rest of the running list out too, and the model runner keeps their state (gpu_model_runner's
    _update_states: "running requests that are not scheduled in this step"). So a pause recomputes
    nothing, unlike an abort and resubmit, and unlike vLLM's own preemption, which frees the KV cache.
    """

    running: list[Any]
    waiting: Any
    vllm_config: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        path = (self.vllm_config.additional_config or {}).get(WIDTH_FILE_KEY)
        self._width = WidthReader(path) if path else None

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        width = UNLIMITED if self._width is None else self._width.read()
        # No width written (the replica's gate has not published one yet): vLLM's own scheduling, and
        # the waiting queue is not copied for nothing.
        paused, held = (
            ([], []) if width == UNLIMITED else paused_and_held(self.running, list(self.waiting), width)
        )
        if not paused and not held:
            return super().schedule(*args, **kwargs)  # type: ignore[misc]
        left_out = {id(r) for r in paused}
        self.running = [r for r in self.running if id(r) not in left_out]
        self.waiting.remove_requests(held)
        try:
            return super().schedule(*args, **kwargs)  # type: ignore[misc]
        finally:
            self.running = self.running + paused
            for request in held:
                self.waiting.add_request(request)


def make(*args: Any, **kwargs: Any) -> Any:
    """The scheduler vLLM's engine core builds (engine arg scheduler_cls): on the class vLLM itself
    would pick, AsyncScheduler where async scheduling is on, else Scheduler."""
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler

    config = kwargs["vllm_config"] if "vllm_config" in kwargs else args[0]
    base = AsyncScheduler if config.scheduler_config.async_scheduling else Scheduler
    return type(f"Pausing{base.__name__}", (_Pausing, base), {})(*args, **kwargs)

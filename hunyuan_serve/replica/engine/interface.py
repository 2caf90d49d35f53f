"""The engine seam: the Engine protocol and the values that cross it (sampling, outputs, stats)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from hunyuan_serve.families.base import Prompt
from hunyuan_serve.replica.engine.width_file import Ack


@dataclass(frozen=True)
class Sampling:
    """Per-request sampling parameters (Hunyuan-MT's recommended values are the config defaults)."""

    temperature: float
    top_p: float
    top_k: int
    repetition_penalty: float
    max_tokens: int
    # OpenAI's penalties (vLLM has both); 0 is off, and what every other API gets.
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Generation:
    """One finished generation with the counts and times the request log reports."""

    text: str
    prompt_tokens: int
    output_tokens: int
    finish_reason: str | None
    queue_s: float = 0.0
    engine_s: float = 0.0


@dataclass(frozen=True)
class Delta:
    """One step of a streamed generation: the text added since the last one; the last delta of a stream
    also carries the whole Generation (counts, finish_reason, times)."""

    text: str
    final: Generation | None = None
    cached: bool = False  # the translation core answered from its cache (an engine never sets it)


@dataclass
class EngineStats:
    """What the engine's scheduler reported: sequences running now and the most seen at once."""

    running: int = 0
    waiting: int = 0
    max_running: int = 0
    steps: int = 0
    # Per priority, the engine's requests it has not scheduled yet (the scheduler's own waiting count
    # has no class): hunyuan_class_waiting (replica/metrics.py). Set by an engine that can ask vLLM;
    # none for an engine with no queue of its own (the stand-in).
    unscheduled: Callable[[], dict[int, int]] | None = None
    # Hands the engine's scheduler the bulk width: how many bulk sequences a step that carries a
    # person's may carry, and how many tokens of new bulk prompts one without a person may take (None:
    # any) (people_scheduler.py). Set by an engine whose scheduler applies it; None for one that has
    # none (the stand-in).
    apply_bulk_width: Callable[[int, int | None], None] | None = None
    # Reads what the pausing scheduler wrote back (replica/engine/width_file.py Ack). Set by an engine whose
    # scheduler acknowledges; None for one that has none (the stand-in).
    acknowledged: Callable[[], Ack] | None = None

    def clock(self) -> int:
        """The step count the stall watch reads: the pausing scheduler's own (one a schedule() call,
        whatever the cadence of vLLM's stat logging) once it has acknowledged a step, else the stat
        logger's."""
        own = 0 if self.acknowledged is None else self.acknowledged().steps
        return own or self.steps

    def people_first_inactive(self, stepped: bool = False) -> bool:
        """The engine has a pausing scheduler to acknowledge the width, has stepped (`stepped`: the
        caller saw it, as the deep probe does; else the stat logger counted a step), and no step was
        ever acknowledged: bulk runs beside people unpaused."""
        if self.acknowledged is None:
            return False
        return (stepped or self.steps > 0) and self.acknowledged().steps == 0

    def people_first(self, stepped: bool = False) -> str | None:
        """ "active" (steps acknowledged), "inactive" (people_first_inactive), "unproven" (no step
        yet), or None where the engine has no pausing scheduler (the stand-in)."""
        if self.acknowledged is None:
            return None
        if self.people_first_inactive(stepped):
            return "inactive"
        return "active" if self.acknowledged().steps else "unproven"

    def waiting_of(self, priority: int) -> int:
        return 0 if self.unscheduled is None else self.unscheduled().get(priority, 0)

    def record(self, running: int, waiting: int) -> None:
        self.running = running
        self.waiting = waiting
        self.max_running = max(self.max_running, running)
        self.steps += 1


class Engine(Protocol):
    """What the replica app needs from an engine; VllmEngine is the real one, tests may fake it."""

    model: str  # the checkpoint's path or hub id, for operators (/health)
    model_name: str  # the served name clients see
    max_model_len: int
    stats: EngineStats

    async def start(self) -> None: ...

    def count_prompt_tokens(self, prompt: Prompt) -> int: ...

    # priority: vLLM's, lower scheduled first (interactive 0, bulk 1: replica/admission/priority.py).
    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation: ...

    async def sample(
        self, prompt: Prompt, sampling: Sampling, request_id: str, n: int, priority: int = 0
    ) -> list[Generation]:
        """n samples of one prompt in one engine request (an ensemble's candidates), in sample order."""
        ...

    def stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> AsyncGenerator[Delta, None]:
        """The generation as it grows; closing the iterator early aborts the engine request."""
        ...

    async def abort(self, request_id: str) -> None: ...

    def is_alive(self) -> bool: ...

    def unfinished(self) -> int: ...

    def shutdown(self) -> None: ...


# Prompts whose token ids are kept: the budget check and the generation of one request share them.
# Room for every text admitted at once (max_in_flight requests of a few texts): a smaller memo evicted
# a batch's ids between its budget check and its generation, which then encoded them again.
ENCODED_MEMO_SIZE = 4096

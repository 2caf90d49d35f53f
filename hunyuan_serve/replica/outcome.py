"""What the translation core answers with: a request's Outcome, a stream's start, a prompt's Completion."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

from hunyuan_serve.replica.engine.interface import Delta, Generation
from hunyuan_serve.replica.review import Verdicts


@dataclass
class Outcome:
    """Results of one request in input order, with what the request log reports."""

    results: list[str] = field(default_factory=list)
    cached: list[bool] = field(default_factory=list)
    # With preserve_format: per text, the markup (opening + closing) the model did not return intact.
    format_lost: list[tuple[str, ...]] = field(default_factory=list)
    # With ensemble: per text, its candidates in sample order (results then holds each text's first).
    candidates: list[list[str]] = field(default_factory=list)
    prompt_tokens: int = 0
    output_tokens: int = 0
    queue_s: float = 0.0
    engine_s: float = 0.0
    # The answer checks (replica/review.py): the policy that applied and each text's failed checks.
    verdicts: Verdicts = field(default_factory=Verdicts)
    # The translation memory (replica/memories/translator.py): each text's exact, fuzzy or miss, and why
    # close matches could not guide the model; empty where no memory was looked up.
    memory: list[str] = field(default_factory=list)
    memory_unguided: str = ""


@dataclass
class StreamStart:
    """How a stream begins: a memory's whole answer (no engine), or the engine's deltas; with, as in
    Outcome, what a memory did for the text where one was looked in."""

    whole: Outcome | None = None
    deltas: AsyncGenerator[Delta, None] | None = None
    memory: list[str] = field(default_factory=list)
    memory_unguided: str = ""


@dataclass(frozen=True)
class Completion:
    """One prompt's answer as sent (OpenAI's routes): the generation, or the cached one as first answered."""

    generation: Generation
    cached: bool

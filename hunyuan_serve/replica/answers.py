"""An answer as the translation cache keeps it, and back: the engine's Generation, its counts kept."""

from __future__ import annotations

from hunyuan_serve.cache.entry import CachedAnswer, decode_answer, encode_answer
from hunyuan_serve.replica.engine.interface import Generation


def cache_entry(generation: Generation) -> str | None:
    """The cache's value for an answer: its text, finish reason and token counts; None for an empty
    answer, never kept (an identical request asks the engine again, its checks and retry run)."""
    if not generation.text.strip():
        return None
    reason = generation.finish_reason or "stop"
    answer = CachedAnswer(generation.text, reason, generation.prompt_tokens, generation.output_tokens)
    return encode_answer(answer)


def from_cache(hit: tuple[str, str] | None) -> Generation | None:
    """The answer a cache hit holds, as the engine gave it (no queue or engine time); None for a miss
    and for an entry written before entries kept their finish reason and counts (answered again)."""
    answer = decode_answer(hit[0]) if hit is not None else None
    if answer is None:
        return None
    return Generation(answer.text, answer.prompt_tokens, answer.output_tokens, answer.finish_reason)

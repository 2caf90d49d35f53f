"""The translation cache's entry: one answer's text, finish reason and token counts, as JSON."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

# The "format" of an entry the cache writes: an entry without it (plain text, from before the entries
# kept how the answer ended and what it counted) is read as a miss, answered again and overwritten.
ANSWER_FORMAT = 2


@dataclass(frozen=True)
class CachedAnswer:
    """What the cache keeps of one answer: its text, why it ended, and the tokens it counted, so that an
    answer from the cache reports what the first one did (a cut-off answer stays "length")."""

    text: str
    finish_reason: str
    prompt_tokens: int
    output_tokens: int


def encode_answer(answer: CachedAnswer) -> str:
    """The entry's value in every layer (memory, SQLite, Redis): one JSON object."""
    fields = {"format": ANSWER_FORMAT, **dataclasses.asdict(answer)}
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def decode_answer(value: str) -> CachedAnswer | None:
    """The answer an entry holds; None for one this format did not write (a miss, never an error)."""
    if not value.startswith("{"):
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") != ANSWER_FORMAT:
        return None
    text, reason = data.get("text"), data.get("finish_reason")
    counts = [data.get("prompt_tokens"), data.get("output_tokens")]
    if not isinstance(text, str) or not isinstance(reason, str):
        return None
    if not all(isinstance(count, int) and not isinstance(count, bool) and count >= 0 for count in counts):
        return None
    return CachedAnswer(text, reason, int(data["prompt_tokens"]), int(data["output_tokens"]))

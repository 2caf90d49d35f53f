"""A failed check, the stable names of the checks, and the X-Hunyuan-QA header that sums them up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

HEADER = "X-Hunyuan-QA"
# The checks' names, stable identifiers that answers, metrics and the header carry, in the order run.
EMPTY = "empty"
WRONG_LANGUAGE = "wrong_language"
ECHO = "echo"
LOOP = "loop"
TRUNCATED = "truncated"
LINES = "lines"
SENTENCES = "sentences"
PARAGRAPHS = "paragraphs"
NUMBERS = "numbers"
URLS = "urls"
PLACEHOLDERS = "placeholders"
MARKUP = "markup"
LENGTH_RATIO = "length_ratio"
CHECKS = (
    EMPTY,
    WRONG_LANGUAGE,
    ECHO,
    LOOP,
    TRUNCATED,
    LINES,
    SENTENCES,
    PARAGRAPHS,
    NUMBERS,
    URLS,
    PLACEHOLDERS,
    MARKUP,
    LENGTH_RATIO,
)
OK = "ok"
# Texts the header lists by index; the rest are counted (`; +K more`), so that the header stays well
# under Nginx's proxy_buffer_size (4 KiB) even for a batch of max_batch_texts texts that all failed.
MAX_LISTED = 32


@dataclass(frozen=True)
class Flag:
    """One failed check of one answer: its name (one of CHECKS) and what was wrong, in words."""

    check: str
    detail: str

    def as_json(self) -> dict[str, str]:
        return {"check": self.check, "detail": self.detail}


def header_value(flags: Sequence[Sequence[Flag]]) -> str:
    """X-Hunyuan-QA for the texts of one answer, in input order.

    `ok` when no text is flagged; else `flagged F/N: ` then, for each flagged text, its index (from
    0), `=` and its checks' names joined by `,`, the texts joined by `; `, e.g.
    `flagged 2/5: 0=echo,loop; 3=wrong_language`; past MAX_LISTED flagged texts, `; +K more`. Only
    names and digits: a header value stays ASCII.
    """
    flagged = [(index, each) for index, each in enumerate(flags) if each]
    if not flagged:
        return OK
    listed = [f"{index}={','.join(flag.check for flag in each)}" for index, each in flagged[:MAX_LISTED]]
    if len(flagged) > MAX_LISTED:
        listed.append(f"+{len(flagged) - MAX_LISTED} more")
    return f"flagged {len(flagged)}/{len(flags)}: {'; '.join(listed)}"

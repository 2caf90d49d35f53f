"""A translation service's answers as the localization pipeline reads them, and its refusals."""

from __future__ import annotations

from dataclasses import dataclass


class TranslateError(Exception):
    """A request the service refused or that could not be completed after the retries allowed."""

    def __init__(self, status: int | None, code: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status or 'no response'} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True)
class QaFlag:
    """One check the service's QA found the translation failing (`check` is its name, e.g. `lines`)."""

    check: str
    detail: str = ""


@dataclass(frozen=True)
class Translation:
    text: str
    result: str
    cached: bool = False
    latency_ms: float | None = None
    request_id: str | None = None
    # The checks it failed (empty: it passed them all); None: unchecked (QA off, or a service without it).
    qa: tuple[QaFlag, ...] | None = None
    memory: str = ""  # the service's translation memory: "exact" (a person's), "fuzzy", "miss"; "": none

"""What a `translate` run did: its counts, each failure, and each translation the service flagged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hunyuan_serve.localization.answers import QaFlag


@dataclass(frozen=True)
class Failure:
    label: str
    source: str
    problem: str


@dataclass(frozen=True)
class Flagged:
    """A translation written, that the service's checks found suspect: for a reviewer to look at."""

    index: int  # the segment's index in the document
    label: str
    source: str
    translation: str
    checks: tuple[QaFlag, ...]

    def reason(self) -> str:
        return "; ".join(f"{f.check}: {f.detail}" if f.detail else f.check for f in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "source": self.source,
            "translation": self.translation,
            "checks": [{"check": f.check, "detail": f.detail} for f in self.checks],
        }


@dataclass
class Summary:
    total: int = 0
    translated: int = 0
    cached: int = 0
    memory: int = 0  # answered from a translation memory (the service's, or --memory): a person's
    skipped: int = 0
    failed: int = 0
    requests: int = 0  # batch requests sent this run
    aborted: str | None = None  # why the run stopped sending early
    failures: list[Failure] = field(default_factory=list)
    failed_at: list[int] = field(default_factory=list)  # indexes of the failed segments
    memory_at: list[int] = field(default_factory=list)  # indexes of the segments a memory answered
    machine_at: list[int] = field(default_factory=list)  # indexes of the model's (translated or cached)
    flagged: list[Flagged] = field(default_factory=list)  # translated, but suspect (the service's QA)

    def line(self) -> str:
        remembered = f"{self.memory} from the memory, " if self.memory else ""
        return (
            f"{self.total} segments: {self.translated} translated, {remembered}{self.cached} cached, "
            f"{self.skipped} skipped, {self.failed} failed, {len(self.flagged)} flagged"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "translated": self.translated,
            "cached": self.cached,
            "memory": self.memory,
            "skipped": self.skipped,
            "failed": self.failed,
            "requests": self.requests,
            "aborted": self.aborted,
            "failures": [f.__dict__ for f in self.failures],
            "flagged": [f.as_dict() for f in self.flagged],
        }

"""What to do with each segment (send, skip, fixed by glossary) and how a translation is accepted."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from enum import Enum

from hunyuan_serve.localization.glossary import FixedTerms
from hunyuan_serve.localization.placeholders import placeholder_problems
from hunyuan_serve.text.placeholders import has_words


class Action(str, Enum):
    SEND = "send"  # goes to the service (or comes from the cache)
    SKIP = "skip"  # nothing to translate: blank, only placeholders, symbols or kept terms
    GLOSSARY = "glossary"  # the whole segment is a glossary term
    MEMORY = "memory"  # the whole segment is a translation memory's source (--memory): a person's


@dataclass(frozen=True)
class Plan:
    """One segment, split into surrounding whitespace and the core the service sees."""

    source: str
    action: Action
    prefix: str
    core: str
    suffix: str
    request: str  # core with glossary renderings in place: what is sent and the cache key
    protected: tuple[str, ...]  # glossary renderings the translation must keep
    fixed: str | None = None  # the output when nothing is sent


@dataclass(frozen=True)
class SegmentResult:
    """The text to write for a segment and, when it failed, why."""

    text: str
    problem: str | None = None


def plan_segment(segment: str, glossary: FixedTerms | None = None) -> Plan:
    """Decide how a segment is handled; whitespace around it is kept as it is."""
    glossary = glossary or FixedTerms()
    core = segment.strip()
    start = segment.find(core) if core else len(segment)
    prefix, suffix = segment[:start], segment[start + len(core) :]
    fixed = glossary.whole(core) if core else None
    if fixed is not None:
        return Plan(segment, Action.GLOSSARY, prefix, core, suffix, core, (), prefix + fixed + suffix)
    request, protected = glossary.apply(core)
    if not has_words(request, protected):
        return Plan(segment, Action.SKIP, prefix, core, suffix, request, protected, segment)
    return Plan(segment, Action.SEND, prefix, core, suffix, request, protected)


def remembered(plan: Plan, memory: dict[str, str]) -> Plan:
    """The plan of a segment a translation memory holds whole: its unit's target, as a person wrote it."""
    if plan.source not in memory:
        return plan
    return Plan(plan.source, Action.MEMORY, "", plan.source, "", plan.source, (), memory[plan.source])


def finish(
    plan: Plan, translation: str | None, error: str | None = None, checked: bool = True
) -> SegmentResult:
    """Accept a translation if it kept every placeholder (a memory's, a person's, is not checked);
    otherwise keep the source and say why."""
    if plan.fixed is not None:
        return SegmentResult(plan.fixed)
    if translation is None:
        return SegmentResult(plan.source, error or "not translated")
    problems = check_translation(plan, translation) if checked else []
    if problems:
        return SegmentResult(plan.source, "; ".join(problems))
    # A person's translation is written as they wrote it, its own spaces included.
    return SegmentResult(plan.prefix + (translation.strip() if checked else translation) + plan.suffix)


def check_translation(plan: Plan, translation: str) -> list[str]:
    """Problems of a translation of plan.request (empty when it can be used and cached)."""
    if not translation.strip():
        return ["empty translation"]
    # Control characters the source did not have break the file formats (msgfmt rejects \x04, XML any).
    controls = sorted({c for c in translation if unicodedata.category(c) == "Cc" and c not in plan.request})
    if controls:
        return ["control characters " + " ".join(f"U+{ord(c):04X}" for c in controls)]
    return placeholder_problems(plan.request, translation, plan.protected)

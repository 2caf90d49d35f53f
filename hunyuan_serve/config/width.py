"""The bulk width's settings: how much bulk work a replica lets run in its engine while people wait."""

from __future__ import annotations

from pydantic import Field

from hunyuan_serve.config.base import Section


class BulkWidthSettings(Section):
    """Fields of the replica section (ReplicaConfig derives from this), so each pool may set its own.

    No figure here is a time or a width: the bulk a person's steps may carry is learnt from the people's
    own pace on the replica's engine (replica/admission/bulk_width.py), so one default fits a CPU, where each
    sequence beside a person slows them, and a GPU, where it hardly does. The new prompts a step between
    a person's strings may start scale with that width.
    """

    # A page sends a string, reads, types: a window of a few seconds keeps the width learnt across
    # those pauses, so the next string does not start from full width again.
    interactive_window_s: float = Field(
        5.0,
        ge=0,
        description="A person counts as active this long after their last interactive request; the "
        "bulk width is full once no interactive request arrived within it (0: the width is always full).",
    )
    # The people's target is 1.5x their idle time, end to end; their pace with no bulk beside them is
    # taken while the job may load the machine's other cores, which costs them some already.
    interactive_step_ratio: float = Field(
        1.2,
        gt=1,
        description="While people are active, a step that carries a person's sequence carries only so "
        "much bulk that the person's time per token stays within this many times their time per token "
        "with no bulk beside them (both measured on this replica).",
    )
    bulk_width_min: int = Field(
        1,
        ge=0,
        description="Bulk sequences every step may carry beside people, however much they slow them "
        "(the job's floor while people are always active; 0: none, where they slow people beyond "
        "interactive_step_ratio).",
    )
    pace_probe_every: int = Field(
        8,
        ge=1,
        description="One person's call in this many runs with no bulk beside it, so that their pace "
        "alone is known while a job never stops.",
    )
    # A string that arrives waits for the step under way. A step that starts a batch of new bulk prompts
    # ran 45 ms here (p90 85 ms) against 20 ms for a step of the job's decode alone, and those steps
    # made most of the person's p95; spread over the next steps, the same prompts cost the job nothing
    # measurable on a CPU (docs/people-first.md). Scaled by the width, so an engine where bulk hardly
    # slows people (a GPU, its width near full) is not held to it.
    narrow_prompt_tokens: int = Field(
        128,
        ge=0,
        description="While people are active and the bulk width is narrower than full, a step that "
        "carries no person's sequence takes at most this many tokens of new bulk prompts per sequence "
        "of the width (at least one), so the step a person's string arrives behind stays short "
        "(0: no limit).",
    )

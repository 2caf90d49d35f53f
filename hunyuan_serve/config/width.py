"""The bulk width's settings: how much bulk work a replica lets run in its engine while people wait."""

from __future__ import annotations

from pydantic import Field

from hunyuan_serve.config.base import Section


class BulkWidthSettings(Section):
    """Fields of the replica section (ReplicaConfig derives from this), so each pool may set its own.

    No figure here is a step time or a width: those are measured on the replica's own engine
    (replica/step_model.py), so one default fits a CPU, where a step costs in proportion to the
    sequences it carries, and a GPU, where it hardly moves.
    """

    # A page sends a string, reads, types: a window of a few seconds keeps the width narrow across
    # those pauses, so the next string does not meet a batch that has grown back in between.
    interactive_window_s: float = Field(
        5.0,
        ge=0,
        description="A person counts as active this long after their last interactive request; the "
        "bulk width is full once no interactive request arrived within it (0: the width is always full).",
    )
    interactive_step_ratio: float = Field(
        1.4,
        gt=1,
        description="While people are active, bulk sequences run only so many that an engine step takes "
        "at most this many times the step the people's own sequences take alone (from step times "
        "measured on this engine).",
    )
    bulk_width_min: int = Field(
        4,
        ge=1,
        description="Bulk sequences the engine may always run, however costly its steps (the job's floor).",
    )

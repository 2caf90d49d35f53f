"""Tells a stalled engine from a busy one: work unfinished and no engine step for too long."""

from __future__ import annotations

from dataclasses import dataclass

_UNSEEN = -1


@dataclass
class ProgressWatch:
    """Fed each health check's facts: engine steps so far, requests unfinished, the time.

    A hung engine still answers HTTP and reports itself alive; what it stops doing is stepping.
    The stall clock runs while there is unfinished work and the step count stands still, from the
    first check that saw that count with work: checks may be minutes apart, so never from earlier.
    """

    steps: int = _UNSEEN
    since: float = 0.0

    def stalled_s(self, steps: int, unfinished: int, now: float) -> float:
        """Seconds the engine has held unfinished work without taking a step; 0 when idle or moving."""
        if unfinished == 0:
            self.steps = _UNSEEN
            return 0.0
        if steps != self.steps:
            self.steps, self.since = steps, now
            return 0.0
        return now - self.since

"""The bulk width: how many bulk sequences may run in the engine at once, people active or not (pure)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping

from hunyuan_serve.config.width import BulkWidthSettings
from hunyuan_serve.replica.step_model import StepModel


class WidthRule:
    """Full while no interactive request arrived within the window; else as many bulk sequences as
    keep a step within interactive_step_ratio of the people's own step, on this engine's line.

    `full` is the width with nobody waiting: what the engine batches less the places kept for people,
    so that bulk never waits in vLLM's queue, where it could not be reordered.
    """

    def __init__(
        self, settings: BulkWidthSettings, full: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self.full = full
        self.floor = min(settings.bulk_width_min, full)
        self.clock = clock
        self._last: float | None = None  # when the latest interactive request arrived

    def interactive_arrived(self) -> None:
        self._last = self.clock()

    def window_left_s(self) -> float:
        """Seconds until the window passes and the width is full again (0: it is)."""
        if self._last is None:
            return 0.0
        return max(0.0, self._last + self.settings.interactive_window_s - self.clock())

    def people_active(self) -> bool:
        return self.window_left_s() > 0

    def width(self, model: StepModel, people: int) -> int:
        """The bulk width now, beside `people` interactive sequences in the engine."""
        if not self.people_active():
            return self.full
        line = model.line()
        if line is None:
            # Nothing measured says what a step costs by size yet: run at half, which teaches the
            # model a second size class, and leave the rest to it.
            return max(self.floor, self.full // 2)
        beside = max(1, people)  # one person at least: the one that arrives next
        limit_s = self.settings.interactive_step_ratio * line.step_s(beside)
        room = line.seqs_within(limit_s) - beside
        if math.isinf(room):
            return self.full
        return max(self.floor, min(self.full, math.floor(room)))


def next_key(
    waiting: Iterable[str | None], running: Mapping[str | None, int], weights: Mapping[str | None, int]
) -> str | None:
    """Of the keys with bulk work waiting (oldest first), the one whose running sequences are fewest
    for its weight (a key's weight: 1 unless the keys file says weight=N); the oldest on a tie.

    Each place freed goes to the key furthest under its weighted share: the shares the admission's
    water-filling gives (priority.weighted_shares), reached one place at a time."""
    best: str | None = None
    best_load = math.inf
    for key in waiting:
        load = running.get(key, 0) / weights.get(key, 1)
        if load < best_load:
            best, best_load = key, load
    return best

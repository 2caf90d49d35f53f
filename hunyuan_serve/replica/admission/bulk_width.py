"""The bulk width: how many bulk sequences a step that carries a person's may carry too (pure)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from statistics import median

from hunyuan_serve.config.width import BulkWidthSettings

# A person's paces with no bulk beside them that the baseline is the median of: the latest few, so a
# machine that gets busier is followed within a few probes.
ALONE_PACES = 8


class WidthRule:
    """Full while no interactive request arrived within the window. While one did, steps that carry a
    person's sequence carry at most `beside` bulk ones (vLLM's scheduler pauses the rest:
    replica/engine/people_scheduler.py), and `beside` is learnt from the people's own pace.

    A person's pace is their engine call's seconds per output token. The baseline is their pace with no
    bulk beside them: the engine had no bulk, the width was 0, or the call was a probe, run at width 0,
    which the rule asks for once in every `pace_probe_every` calls so that the baseline holds under a
    job that never stops (from a width of 0, the probe runs at 1 instead). Each call beside bulk moves
    `beside`: halved (not under bulk_width_min) when the pace exceeded interactive_step_ratio times the
    baseline, else grown by a quarter (at least one, up to full). So
    where a step costs more the more it carries and the frontend shares the core (a CPU), `beside` stays
    near the floor; where it hardly moves (a GPU's decode), it grows to full within a few dozen calls.

    `full` is the width with nobody waiting: what the engine batches less the places kept for people,
    so that a person always finds a place in the next step.
    """

    def __init__(
        self, settings: BulkWidthSettings, full: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self.full = full
        self.floor = min(settings.bulk_width_min, full)
        self.beside = self.floor
        self.clock = clock
        self.alone: deque[float] = deque(maxlen=ALONE_PACES)
        self.probing = 0  # people's calls running as probes now
        self.probe_width = 0  # the width they run at
        self._since_probe = 0  # people's calls since the last probe
        self._last: float | None = None  # when the latest interactive request arrived

    def interactive_arrived(self) -> bool:
        """A person's call starts: True when it is to run as a probe (at probe_width while it runs)."""
        self._last = self.clock()
        if not self.people_active():
            return False
        if self.alone and self._since_probe < self.settings.pace_probe_every - 1:
            self._since_probe += 1
            return False
        self._since_probe = 0
        # Down to 0 for the pace alone; from a width of 0, whose every call is alone, up to 1, which is
        # how a width the rule brought to 0 (bulk_width_min 0) ever grows again.
        self.probe_width = min(1, self.full) if self.alone and self.beside == 0 else 0
        self.probing += 1
        return True

    def window_left_s(self) -> float:
        """Seconds until the window passes and the width is full again (0: it is)."""
        if self._last is None:
            return 0.0
        return max(0.0, self._last + self.settings.interactive_window_s - self.clock())

    def people_active(self) -> bool:
        return self.window_left_s() > 0

    def width(self) -> int:
        """The bulk sequences a step that carries a person's may carry now."""
        if not self.people_active():
            return self.full
        return self.probe_width if self.probing else self.beside

    def prompt_tokens(self) -> int | None:
        """Tokens of new bulk prompts a step without a person's sequence may take now (None: any).
        Limited only while the width is narrower than full, in proportion to it: a step under way is
        one a person's next string waits for, and one that starts a batch of prompts is several times
        longer than the job's decode alone where a step costs what it carries."""
        per_width = self.settings.narrow_prompt_tokens
        width = self.width()
        if per_width == 0 or width >= self.full:
            return None
        return per_width * max(1, width)

    def person_done(self, pace_s: float | None, probe: bool, bulk_beside: int) -> None:
        """A person's call ended: its seconds per output token (None: not measured), whether it was a
        probe, and the most bulk the width let beside it while it ran (0: the engine had none)."""
        if probe:
            self.probing -= 1
        if pace_s is None or pace_s <= 0:
            return
        if bulk_beside == 0:
            self.alone.append(pace_s)
            return
        if not self.alone:
            return
        if pace_s > self.settings.interactive_step_ratio * median(self.alone):
            self.beside = max(self.floor, self.beside // 2)
        else:
            self.beside = min(self.full, self.beside + max(1, self.beside // 4))


def next_key(
    waiting: Iterable[str | None], running: Mapping[str | None, int], weights: Mapping[str | None, int]
) -> str | None:
    """Of the keys with bulk work waiting (oldest first), the one whose running sequences are fewest
    for its weight (a key's weight: 1 unless the keys file says weight=N); the oldest on a tie.

    Each place freed goes to the key furthest under its weighted share: the shares the admission's
    water-filling gives (priority.weighted_shares), reached one place at a time."""
    best: str | None = None
    best_load = float("inf")
    for key in waiting:
        load = running.get(key, 0) / weights.get(key, 1)
        if load < best_load:
            best, best_load = key, load
    return best

"""The engine's step time against the sequences a step carries, learnt online from its own steps."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from statistics import median

# The steps of a size class its figure is read from: the latest WINDOW, so a machine that gets busier
# (a neighbour, a longer text mix) is followed within that many steps of each size.
WINDOW = 64


# A size class not seen for this many steps counts half in the line, for twice as many a quarter: the
# sizes the engine runs now say most about what a step costs now.
STALE_STEPS = 1000


@dataclass
class _Bucket:
    """A size class's latest steps: its figure is their mean size and their median time. The median, not
    the mean: an engine's first steps, a collection or a preempted core make a few steps several times
    longer, and a mean of a class seen a dozen times would take that for a slope."""

    sizes: deque[int] = field(default_factory=lambda: deque(maxlen=WINDOW))
    times: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    seen: int = 0  # the model's step count when this class last had a step

    def add(self, seqs: int, seconds: float, now: int) -> None:
        self.seen = now
        self.sizes.append(seqs)
        self.times.append(seconds)

    @property
    def seqs(self) -> float:
        return sum(self.sizes) / len(self.sizes)

    @property
    def seconds(self) -> float:
        return median(self.times)


@dataclass(frozen=True)
class Line:
    """step_s = intercept_s + per_seq_s * sequences; per_seq_s 0 where a step is flat (a GPU's decode)."""

    intercept_s: float
    per_seq_s: float

    def step_s(self, seqs: float) -> float:
        return self.intercept_s + self.per_seq_s * seqs

    def seqs_within(self, limit_s: float) -> float:
        """The most sequences a step may carry and stay within `limit_s` (infinite when flat)."""
        if self.per_seq_s <= 0:
            return float("inf")
        return (limit_s - self.intercept_s) / self.per_seq_s


class StepModel:
    """A line through the mean step time of each size class of batch (1, 2-3, 4-7, 8-15, ...).

    By class, not by step: a busy engine steps a thousand times at its full width for each step it
    takes alone, and a least-squares line through the raw steps would hardly see the small ones. Two
    classes at least make a line; until then there is none (`line()` is None).
    """

    def __init__(self) -> None:
        self._buckets: dict[int, _Bucket] = {}
        self._steps = 0

    def observe(self, seqs: int, seconds: float) -> None:
        """One engine step: how many sequences it carried and how long it took (the core's own timing)."""
        if seqs < 1 or seconds <= 0:
            return  # an empty or dummy step says nothing about batch size
        self._steps += 1
        self._buckets.setdefault(seqs.bit_length(), _Bucket()).add(seqs, seconds, self._steps)

    def line(self) -> Line | None:
        """Weighted least squares through the classes' figures, each weighed by how lately it was seen
        and how many steps it holds: a class passed through in two steps (a batch filling up, both
        carrying prefills) says less of what a size costs than one the engine ran at for dozens."""
        points = [
            (b.seqs, b.seconds, len(b.times) / WINDOW * 0.5 ** ((self._steps - b.seen) / STALE_STEPS))
            for b in self._buckets.values()
        ]
        if len(points) < 2:
            return None
        total = sum(w for _, _, w in points)
        mean_x = sum(x * w for x, _, w in points) / total
        mean_y = sum(y * w for _, y, w in points) / total
        spread = sum(w * (x - mean_x) ** 2 for x, _, w in points)
        slope = sum(w * (x - mean_x) * (y - mean_y) for x, y, w in points) / spread if spread > 0 else 0.0
        if slope <= 0:  # larger batches no slower: flat, at the mean step
            return Line(mean_y, 0.0)
        return Line(max(0.0, mean_y - slope * mean_x), slope)

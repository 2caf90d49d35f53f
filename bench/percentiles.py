"""The nearest-rank percentile the bench's latency figures share."""

from __future__ import annotations

import math
from collections.abc import Iterable

# share * count in floating point lands a hair above a whole rank (0.07 * 100 is 7.000000000000001),
# which ceil would push to the next one: the product is rounded to this many places first.
_RANK_PLACES = 9


def nearest_rank(values: Iterable[float], share: float) -> float:
    """The smallest value with at least `share` (in (0, 1]) of the values at or below it; 0 for none."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = math.ceil(round(share * len(ordered), _RANK_PLACES))
    return ordered[min(max(rank, 1), len(ordered)) - 1]

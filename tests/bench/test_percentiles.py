"""The bench's nearest-rank percentile: ranks, ends and floating point's near-whole products."""

from __future__ import annotations

import pytest

from bench.percentiles import nearest_rank

HUNDRED = [float(v) for v in range(1, 101)]


@pytest.mark.parametrize(
    ("values", "share", "expected"),
    [
        ([], 0.5, 0.0),
        ([3.0], 0.95, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 0.5, 2.0),
        ([5.0, 1.0, 3.0, 2.0, 4.0], 0.5, 3.0),  # unsorted in
        (HUNDRED, 0.95, 95.0),
        (HUNDRED, 0.07, 7.0),  # 0.07 * 100 is 7.000000000000001 in floating point: still rank 7
        (HUNDRED, 0.29, 29.0),  # 28.999999999999996: rank 29
        (HUNDRED, 0.001, 1.0),  # below the first rank: the smallest
        (HUNDRED, 1.0, 100.0),
        ([float(v) for v in range(1, 1001)], 0.99, 990.0),
    ],
)
def test_the_smallest_value_with_that_share_at_or_below_it(
    values: list[float], share: float, expected: float
) -> None:
    assert nearest_rank(values, share) == expected


def test_any_iterable_of_values() -> None:
    assert nearest_rank((v for v in (4.0, 2.0, 9.0)), 0.5) == 4.0

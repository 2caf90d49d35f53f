"""Table tests of core lists: ranges as vLLM reads them, and which cores compute threads get."""

from __future__ import annotations

import pytest

from hunyuan_serve.cores import compute_cores, core_ranges


@pytest.mark.parametrize(
    ("cores", "text"), [([0], "0"), ([0, 1, 2, 3, 6], "0-3,6"), ([5, 1, 2], "1-2,5"), ([], "")]
)
def test_core_ranges(cores: list[int], text: str) -> None:
    assert core_ranges(cores) == text


@pytest.mark.parametrize(
    ("cores", "reserved", "expected"),
    [
        ([0, 1], 1, [1]),
        ([3, 2, 1, 0], 1, [1, 2, 3]),
        ([4, 5, 6, 7], 2, [6, 7]),
        ([0], 1, [0]),  # one core: nothing to spare, the threads get it
        ([0, 1], 2, [0, 1]),
        ([0, 1], 0, [0, 1]),
    ],
)
def test_compute_cores_leave_the_first_to_the_front_end(
    cores: list[int], reserved: int, expected: list[int]
) -> None:
    assert compute_cores(cores, reserved) == expected

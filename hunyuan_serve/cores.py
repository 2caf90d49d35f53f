"""CPU core lists in the '0-3,6' form that vLLM's CPU thread binding and taskset read."""

from __future__ import annotations

from collections.abc import Sequence


def core_ranges(cores: Sequence[int]) -> str:
    """'0-3,6' for [0, 1, 2, 3, 6]."""
    runs: list[list[int]] = []
    for core in sorted(cores):
        if runs and core == runs[-1][-1] + 1:
            runs[-1].append(core)
        else:
            runs.append([core])
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)

"""`--k6-cores`: k6 and the stack's Nginx on some cores, the stack on the rest; how k6 is started."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.k6run import launcher
from bench.run import parse_args
from bench.session import split_cores


def test_k6_cores_parses_a_comma_list_and_defaults_to_none() -> None:
    assert parse_args(["--k6-cores", "1"]).k6_cores == (1,)
    assert parse_args(["--k6-cores", "3,1,3"]).k6_cores == (1, 3)
    assert parse_args([]).k6_cores == ()


@pytest.mark.parametrize("bad", ["x", "1-2", "-1", ""])
def test_k6_cores_refuses_what_is_not_a_core_list(bad: str) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--k6-cores", bad])


def test_split_cores_leaves_the_stack_the_other_cores() -> None:
    assert split_cores([0, 1], [1]) == (0,)
    assert split_cores([0, 1, 2, 3], [3, 0]) == (1, 2)


def test_split_cores_names_a_core_it_does_not_have_and_an_empty_stack() -> None:
    with pytest.raises(ValueError, match=r"core\(s\) \[5\] not among"):
        split_cores([0, 1], [1, 5])
    with pytest.raises(ValueError, match="leaves no core for the stack"):
        split_cores([0, 1], [0, 1])


def test_launcher_prefixes_taskset_and_nice_only_when_asked() -> None:
    assert launcher() == []
    assert launcher(5) == ["nice", "-n", "5"]
    assert launcher(0, (0, 1, 3)) == ["taskset", "--cpu-list", "0-1,3"]
    assert launcher(5, (2,)) == ["taskset", "--cpu-list", "2", "nice", "-n", "5"]


def test_launcher_really_confines_the_process_to_its_cores() -> None:
    core = min(os.sched_getaffinity(0))
    probe = [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"]
    cmd = [*launcher(1, (core,)), *probe]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout.strip() == str([core])

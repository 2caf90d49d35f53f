"""The lane split (pure) and the lane runner on real small pytest sessions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.lane_runner import NO_TESTS_COLLECTED, combined_status, lane_argv, lane_env
from tests.support.lanes import (
    DEFAULT_HEAVY_S,
    DEFAULT_LIGHT_S,
    Lane,
    Module,
    assign,
    load_weights,
    merged_weights,
    parse_lane,
    weight,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "lane"),
    [("0/1", Lane(0, 1)), ("1/2", Lane(1, 2)), (" 3/4 ", Lane(3, 4))],
)
def test_a_lane_is_read_from_i_slash_n(text: str, lane: Lane) -> None:
    assert parse_lane(text) == lane


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("2", "wants I/N"),
        ("a/b", "wants I/N"),
        ("-1/2", "wants I/N"),
        ("2/2", "below the count"),
        ("0/0", "below the count"),
    ],
)
def test_a_bad_lane_is_refused_naming_the_problem(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_lane(text)


def test_a_module_missing_from_the_weights_counts_as_a_typical_one_of_its_kind() -> None:
    seconds = {"a.py": 7.0}
    assert weight(Module("a.py", heavy=True), seconds) == 7.0
    assert weight(Module("b.py", heavy=True), seconds) == DEFAULT_HEAVY_S
    assert weight(Module("c.py", heavy=False), seconds) == DEFAULT_LIGHT_S


def test_the_heaviest_go_first_each_to_the_least_loaded_lane() -> None:
    seconds = {"a.py": 50, "b.py": 40, "c.py": 30, "d.py": 20, "e.py": 10}
    modules = [Module(path, heavy=True) for path in seconds]
    # a -> 0 (50); b -> 1 (40); c -> 1 (70); d -> 0 (70); e -> 0 (80), lane 0 winning the tie.
    assert assign(modules, seconds, 2) == {"a.py": 0, "b.py": 1, "c.py": 1, "d.py": 0, "e.py": 0}


def test_modules_sharing_a_stack_stay_in_one_lane_even_through_a_third() -> None:
    modules = [
        Module("a.py", True, frozenset({"shared_stack"})),
        Module("b.py", True, frozenset({"keyed_stack"})),
        Module("c.py", True, frozenset({"shared_stack", "keyed_stack"})),
        Module("d.py", True),
        Module("e.py", True),
    ]
    seconds = {"a.py": 10, "b.py": 10, "c.py": 10, "d.py": 25, "e.py": 20}
    lanes = assign(modules, seconds, 2)
    assert lanes["a.py"] == lanes["b.py"] == lanes["c.py"] == 0  # one group of 30 s, the heaviest
    assert lanes["d.py"] == 1 and lanes["e.py"] == 1


def test_the_split_is_the_same_whatever_order_the_modules_come_in() -> None:
    modules = [Module(f"m{i}.py", heavy=i % 3 == 0) for i in range(12)]
    seconds = {"m1.py": 3.0, "m4.py": 3.0, "m7.py": 9.0}
    assert assign(modules, seconds, 3) == assign(list(reversed(modules)), seconds, 3)


def test_one_lane_takes_every_module() -> None:
    modules = [Module("a.py", True), Module("b.py", False)]
    assert assign(modules, {}, 1) == {"a.py": 0, "b.py": 0}


def test_a_run_re_measures_its_modules_and_keeps_the_others() -> None:
    old = {"kept.py": 4.0, "again.py": 99.0}
    measured = [("again.py", 1.0), ("new.py", 0.25), ("again.py", 2.04)]
    assert merged_weights(old, measured) == {"again.py": 3.0, "kept.py": 4.0, "new.py": 0.2}


def test_no_weights_file_means_every_module_counts_as_a_default(tmp_path: Path) -> None:
    assert load_weights(tmp_path / "missing.json") == {}


def test_the_checked_in_weights_name_modules_that_exist() -> None:
    gone = [module for module in load_weights() if not (REPO / module).is_file()]
    assert not gone, (
        f"tests/lane_weights.json names modules that no longer exist: {gone}; re-record it with"
        " `pytest --record-lane-weights tests/lane_weights.json`, or delete their lines"
    )


@pytest.mark.parametrize(
    ("statuses", "status"),
    [
        ([0, 0], 0),
        ([0, 1], 1),
        ([2, 1], 2),
        ([0, NO_TESTS_COLLECTED], 0),  # a selection narrow enough to leave one lane empty
        ([NO_TESTS_COLLECTED, NO_TESTS_COLLECTED], NO_TESTS_COLLECTED),
        ([NO_TESTS_COLLECTED, 1], 1),
    ],
)
def test_the_run_fails_when_any_lane_fails(statuses: list[int], status: int) -> None:
    assert combined_status(statuses) == status


def test_each_lane_has_a_cache_directory_of_its_own() -> None:
    argvs = [lane_argv(i, 2, ["-q"]) for i in range(2)]
    assert [argv[3] for argv in argvs] == ["--lane=0/2", "--lane=1/2"]
    assert argvs[0][argvs[0].index("-o") + 1] != argvs[1][argvs[1].index("-o") + 1]


def _write_suite(root: Path, failing: str | None) -> None:
    """A tiny suite of two light modules whose conftest splits it as the real one does."""
    (root / "tests").mkdir()
    for name in ("a", "b"):
        body = "assert False" if name == failing else "assert True"
        (root / "tests" / f"test_{name}.py").write_text(f"def test_{name}():\n    {body}\n")
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (root / "tests" / "conftest.py").write_text(
        "from tests.support import lanes\n"
        "def pytest_addoption(parser):\n    lanes.add_options(parser)\n"
        "def pytest_configure(config):\n    lanes.configure(config)\n"
        "def pytest_collection_modifyitems(config, items):\n    lanes.keep_own_lane(config, items)\n"
    )


def _pytest(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, *argv, "-p", "no:cacheprovider"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("failing", "status"), [(None, 0), ("b", 1)])
def test_the_runner_runs_each_lane_and_fails_with_a_failing_one(
    tmp_path: Path, failing: str | None, status: int
) -> None:
    _write_suite(tmp_path, failing)
    done = _pytest(tmp_path, "-m", "tests.support.lane_runner", "--lanes", "2", "-q")
    assert done.returncode == status, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for lane in ("[lane 0] ", "[lane 1] "):  # one module each, passed or failed
        assert any(line.startswith(lane) and " in " in line for line in lines), done.stdout
    assert sum("1 passed" in line for line in lines) == (2 if failing is None else 1), done.stdout
    assert lines[-1].startswith("lanes: exit statuses") and lines[-1].endswith(f"-> {status}"), done.stdout


def test_a_lane_left_empty_by_the_selection_does_not_fail_the_run(tmp_path: Path) -> None:
    _write_suite(tmp_path, None)
    done = _pytest(tmp_path, "-m", "tests.support.lane_runner", "--lanes", "2", "-q", "tests/test_a.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "exit statuses [0, 5]" in done.stdout or "exit statuses [5, 0]" in done.stdout, done.stdout


def test_a_recorded_run_writes_each_module_it_ran_and_keeps_the_rest(tmp_path: Path) -> None:
    _write_suite(tmp_path, None)
    weights = tmp_path / "weights.json"
    weights.write_text(json.dumps({"tests/test_gone.py": 9.0, "tests/test_a.py": 99.0}))
    done = _pytest(tmp_path, "-m", "pytest", "-q", f"--record-lane-weights={weights}")
    assert done.returncode == 0, done.stdout + done.stderr
    recorded = json.loads(weights.read_text())
    assert recorded.keys() == {"tests/test_a.py", "tests/test_b.py", "tests/test_gone.py"}
    assert recorded["tests/test_gone.py"] == 9.0 and recorded["tests/test_a.py"] < 99.0


def test_the_lanes_write_bytecode_whatever_the_callers_shell_says() -> None:
    env = lane_env({"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin", "PYTHONUNBUFFERED": "0"})
    assert env == {"PATH": "/usr/bin", "PYTHONUNBUFFERED": "1"}

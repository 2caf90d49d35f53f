"""The suite's modules split into lanes: pytest sessions that `make test` runs side by side.

A lane is a whole pytest session (`--lane I/N` keeps its share of the selected modules), so every
per-session decision (which shared stacks, offline runs and demo conversion to start) is already
made from that lane's own items. Modules that ask for the same shared stack stay in one lane, so no
stack starts twice. Lanes are balanced by each module's seconds in tests/lane_weights.json,
recorded with `--record-lane-weights`; a module missing there counts as a typical one of its kind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.shared_stack import SHARED_FIXTURES, asks, is_heavy, module_of

WEIGHTS_FILE = Path(__file__).resolve().parents[1] / "lane_weights.json"
# A module absent from the weights file: about a median heavy module, and a median light one.
DEFAULT_HEAVY_S = 20.0
DEFAULT_LIGHT_S = 0.5


@dataclass(frozen=True)
class Lane:
    index: int
    count: int


def parse_lane(text: str) -> Lane:
    """'I/N' (0 <= I < N) as a Lane; ValueError naming the problem otherwise."""
    match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if match is None:
        raise ValueError(f"--lane wants I/N, like 0/2; got {text!r}")
    lane = Lane(int(match[1]), int(match[2]))
    if lane.count < 1 or not 0 <= lane.index < lane.count:
        raise ValueError(f"--lane {text}: the index must be at least 0 and below the count")
    return lane


@dataclass(frozen=True)
class Module:
    """A selected module: its path, whether it starts engines or `up`, the shared stacks it asks for."""

    path: str
    heavy: bool
    shared: frozenset[str] = frozenset()


def modules(items: Sequence[pytest.Item]) -> list[Module]:
    """The selected items' modules, in the order first met."""
    heavy: dict[str, bool] = {}
    shared: dict[str, frozenset[str]] = {}
    for item in items:
        path = module_of(item)
        heavy[path] = heavy.get(path, False) or is_heavy(item)
        asked = frozenset(fixture for fixture in SHARED_FIXTURES if asks(item, fixture))
        shared[path] = shared.get(path, frozenset()) | asked
    return [Module(path, heavy[path], shared[path]) for path in heavy]


def _groups(modules: Sequence[Module]) -> list[list[Module]]:
    """Modules joined where they ask for a common shared stack (transitively)."""
    groups: list[list[Module]] = []
    for module in modules:
        touching = [g for g in groups if any(module.shared & other.shared for other in g)]
        merged = [m for g in touching for m in g] + [module]
        groups = [g for g in groups if g not in touching] + [merged]
    return groups


def weight(module: Module, seconds: Mapping[str, float]) -> float:
    if module.path in seconds:
        return seconds[module.path]
    return DEFAULT_HEAVY_S if module.heavy else DEFAULT_LIGHT_S


def assign(modules: Sequence[Module], seconds: Mapping[str, float], count: int) -> dict[str, int]:
    """module path -> lane index: the heaviest group first, each into the lane with the least so far.

    Deterministic for the same inputs, so every lane computes the same split on its own.
    """
    loads = [0.0] * count
    lanes: dict[str, int] = {}
    groups = _groups(modules)
    keyed = [(sum(weight(m, seconds) for m in group), group[0].path, group) for group in groups]
    for total, _, group in sorted(keyed, key=lambda entry: (-entry[0], entry[1])):
        lane = loads.index(min(loads))
        loads[lane] += total
        lanes.update((m.path, lane) for m in group)
    return lanes


def load_weights(path: Path = WEIGHTS_FILE) -> dict[str, float]:
    """The recorded seconds per module; none when the file is missing (every module then a default)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {str(module): float(value) for module, value in data.items()}


def merged_weights(old: Mapping[str, float], measured: Iterable[tuple[str, float]]) -> dict[str, float]:
    """The weights file after a run: this run's modules re-measured (summed), the others kept."""
    fresh: dict[str, float] = {}
    for module, seconds in measured:
        fresh[module] = fresh.get(module, 0.0) + seconds
    merged = {**old, **{module: round(total, 1) for module, total in fresh.items()}}
    return dict(sorted(merged.items()))


class WeightRecorder:
    """A plugin (--record-lane-weights PATH): each module's setup, call and teardown seconds, written
    into PATH at the session's end, merged with the modules this session did not run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.spent: list[tuple[str, float]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.spent.append((module_of(report), report.duration))

    def pytest_sessionfinish(self) -> None:
        weights = merged_weights(load_weights(self.path), self.spent)
        self.path.write_text(json.dumps(weights, indent=1) + "\n", encoding="utf-8")


_LANE = pytest.StashKey[Lane]()  # this session's --lane, read once by configure()


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("lanes", "parallel lanes (tests/support/lanes.py)")
    group.addoption("--lane", default="0/1", help="run lane I of N (I/N): this session's share of modules")
    group.addoption(
        "--record-lane-weights",
        metavar="PATH",
        help="write each module's seconds in this session into PATH (the modules it did not run kept)",
    )


def configure(config: pytest.Config) -> None:
    """Reads --lane (a bad one refused before collection); registers the recorder when asked for."""
    try:
        config.stash[_LANE] = parse_lane(config.getoption("--lane"))
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    if record := config.getoption("--record-lane-weights"):
        config.pluginmanager.register(WeightRecorder(Path(record)), "lane-weights")


def keep_own_lane(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselects the items of the modules other lanes run."""
    lane = config.stash[_LANE]
    if lane.count == 1:
        return
    split = assign(modules(items), load_weights(), lane.count)
    mine = [split[module_of(item)] == lane.index for item in items]
    config.hook.pytest_deselected(items=[item for item, own in zip(items, mine, strict=True) if not own])
    items[:] = [item for item, own in zip(items, mine, strict=True) if own]

"""light_modules_first and last_users on stand-in items (pure ordering logic)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from tests.support.shared_stack import KEYS, last_users, light_modules_first


@dataclass
class Item:
    nodeid: str
    markers: tuple[str, ...] = ()
    fixturenames: list[str] = field(default_factory=list)

    def get_closest_marker(self, name: str) -> Any:
        return name if name in self.markers else None


def ids(items: list[Any]) -> list[str]:
    return [item.nodeid for item in items]


def test_a_module_with_one_heavy_test_moves_after_the_light_ones_whole_and_in_order() -> None:
    items = [
        Item("tests/api/test_a.py::one"),
        Item("tests/api/test_a.py::two", ("engine",)),
        Item("tests/api/test_b.py::one"),
        Item("tests/unit/test_c.py::one"),
        Item("tests/supervise/test_d.py::one", ("e2e",)),
        Item("tests/unit/test_c.py::two"),
    ]
    ordered = light_modules_first(cast(list[pytest.Item], items))
    assert ids(ordered) == [
        "tests/api/test_b.py::one",
        "tests/unit/test_c.py::one",
        "tests/unit/test_c.py::two",
        "tests/api/test_a.py::one",
        "tests/api/test_a.py::two",
        "tests/supervise/test_d.py::one",
    ]


def test_nothing_heavy_keeps_the_order() -> None:
    items = [Item("tests/b.py::x"), Item("tests/a.py::y"), Item("tests/b.py::z")]
    assert ids(light_modules_first(cast(list[pytest.Item], items))) == [
        "tests/b.py::x",
        "tests/a.py::y",
        "tests/b.py::z",
    ]


def test_the_stack_is_launched_only_when_a_selected_test_asks_for_it() -> None:
    asking = Item("tests/api/test_a.py::x", fixturenames=["shared_stack", "tmp_path"])
    fixtures = ("shared_stack", "keyed_stack")
    assert "shared_stack" in last_users(cast(list[pytest.Item], [Item("t.py::a"), asking]), fixtures)
    not_asking = [Item("t.py::a", fixturenames=["tmp_path"])]
    assert "shared_stack" not in last_users(cast(list[pytest.Item], not_asking), fixtures)
    assert "keyed_stack" not in last_users(cast(list[pytest.Item], [asking]), fixtures)


def test_heavy_modules_on_a_shared_stack_come_first_among_the_heavy_ones() -> None:
    items = [
        Item("tests/a.py::own", ("e2e",)),
        Item("tests/b.py::one", ("engine",), ["keyed_stack"]),
        Item("tests/b.py::two", ("engine",)),
        Item("tests/c.py::light"),
        Item("tests/d.py::open", ("engine",), ["shared_stack"]),
    ]
    ordered = light_modules_first(cast(list[pytest.Item], items))
    assert ids(ordered) == [
        "tests/c.py::light",
        "tests/b.py::one",
        "tests/b.py::two",
        "tests/d.py::open",
        "tests/a.py::own",
    ]


def test_the_users_of_a_stack_started_by_its_first_user_come_after_the_users_of_those_started_ahead() -> None:
    items = [
        Item("tests/a.py::own", ("e2e",)),
        Item("tests/b.py::pools", ("engine",), ["pools_stack"]),
        Item("tests/c.py::restart", ("engine",), ["restart_stack"]),
        Item("tests/d.py::keyed", ("engine",), ["keyed_stack"]),
        Item("tests/e.py::pools", ("engine",), ["pools_stack"]),
        Item("tests/f.py::light"),
        Item("tests/g.py::restart", ("engine",), ["restart_stack"]),
    ]
    shared = ("shared_stack", "keyed_stack", "restart_stack", "pools_stack")
    ordered = light_modules_first(cast(list[pytest.Item], items), shared)
    # Each lazily started stack's users together, so it stops before the next one starts.
    assert ids(ordered) == [
        "tests/f.py::light",
        "tests/d.py::keyed",
        "tests/c.py::restart",
        "tests/g.py::restart",
        "tests/b.py::pools",
        "tests/e.py::pools",
        "tests/a.py::own",
    ]


def test_each_stack_stops_after_its_last_user_in_run_order() -> None:
    items = [
        Item("t.py::a", fixturenames=["shared_stack"]),
        Item("t.py::b", fixturenames=["keyed_stack", "shared_stack"]),
        Item("t.py::c", fixturenames=["keyed_stack"]),
        Item("t.py::d"),
    ]
    found = last_users(cast(list[pytest.Item], items), ("shared_stack", "keyed_stack", "other"))
    assert found == {"shared_stack": "t.py::b", "keyed_stack": "t.py::c"}


def test_the_keyed_stack_keys_are_distinct_and_its_lines_carry_the_limits() -> None:
    secrets = [key.secret for key in KEYS.values()]
    assert len(set(secrets)) == len(secrets)
    assert KEYS["deepl-limited"].line() == f"{KEYS['deepl-limited'].secret} limit=40"
    assert KEYS["keys"].line() == KEYS["keys"].secret

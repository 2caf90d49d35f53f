"""light_modules_first and uses_shared_stack on stand-in items (pure ordering logic)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from tests.support.shared_stack import light_modules_first, uses_shared_stack


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
    assert uses_shared_stack(cast(list[pytest.Item], [Item("t.py::a"), asking]))
    assert not uses_shared_stack(cast(list[pytest.Item], [Item("t.py::a", fixturenames=["tmp_path"])]))

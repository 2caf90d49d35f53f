"""No page repeats a default by hand: a YAML example sets no key to its default, and no prose writes a
key's default beside it; both belong to docs/settings.md, which is generated from the config."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from hunyuan_serve.config import GatewayConfig, ServeConfig
from hunyuan_serve.config.reference import default_text
from tests.docs.readme_examples import PAGES, REPO

YAML_FENCE = re.compile(r"^```yaml\n(.*?)^```", re.M | re.S)
# `replica.max_in_flight` (256 …, `nginx.port`, 8080 …: a key and the value written right after it.
PROSE = re.compile(r"`([a-z_]+(?:\.[a-z_]+)+)`,? \(?([^\s),;]+)")
SECTIONS: dict[str, type[BaseModel]] = {
    name: info.annotation
    for name, info in ServeConfig.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
} | {"gateway": GatewayConfig}


def _field(key: str) -> Any:
    section, _, name = key.rpartition(".")
    model: type[BaseModel] | None = SECTIONS.get(section) if section else ServeConfig
    return model.model_fields.get(name) if model is not None else None


def _is_default(key: str, value: Any) -> bool:
    info = _field(key)
    return (
        info is not None and not info.is_required() and value == info.get_default(call_default_factory=True)
    )


def restated(data: Any, where: str) -> Iterator[str]:
    """The keys of a parsed YAML example (a config or an inventory) set to their defaults."""
    for key, value in (data or {}).items() if isinstance(data, dict) else ():
        if key in SECTIONS and isinstance(value, dict):
            pairs = [(f"{key}.{name}", inner) for name, inner in value.items()]
        else:
            pairs = [(key, value)]
        yield from (f"{where}: {dotted}: {inner!r}" for dotted, inner in pairs if _is_default(dotted, inner))


def restated_in_prose(text: str, where: str) -> Iterator[str]:
    """The keys the prose writes with their default value right after them, e.g. `nginx.port` (8080)."""
    for key, value in PROSE.findall(YAML_FENCE.sub("", text)):
        info = _field(key)
        if info is not None and not info.is_required() and value.strip("`") == default_text(info):
            yield f"{where}: `{key}` {value}"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_no_page_repeats_a_default_by_hand(page: Path) -> None:
    if page.name == "settings.md":
        pytest.skip("the generated reference is where the defaults are")
    text = page.read_text(encoding="utf-8")
    found = [gap for block in YAML_FENCE.findall(text) for gap in restated(yaml.safe_load(block), page.name)]
    found += restated_in_prose(text, page.name)
    assert found == [], "link docs/settings.md instead"


def test_a_restated_default_is_found_in_an_example_and_in_prose() -> None:
    data = yaml.safe_load("nginx: {port: 8080, listen: 0.0.0.0}\nreplicas: 2\nengine: {model: m}\n")
    assert list(restated(data, "x")) == ["x: nginx.port: 8080"]
    assert list(restated({"replicas": 1, "base_port": 9000}, "x")) == ["x: replicas: 1"]
    text = "Nginx listens on `nginx.port` (8080), `nginx.listen` (the loopback) and `engine.model` m."
    assert list(restated_in_prose(text, "x")) == ["x: `nginx.port` 8080"]

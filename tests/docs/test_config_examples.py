"""Every YAML example of the README and docs/ is a config `up` accepts or an inventory the gateway accepts,
validated as each reads its file, so no example shows a key or a value the code refuses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from hunyuan_serve.config import ConfigError, ServeConfig, build_config
from hunyuan_serve.gateway.inventory import Inventory, parse_inventory
from tests.support.readme_examples import PAGES, REPO

YAML_FENCE = re.compile(r"^```yaml\n(.*?)^```", re.M | re.S)
# An inventory names its hosts; a config never has that key.
INVENTORY_KEY = "hosts"
# Blocks that are neither (a Kubernetes manifest, a compose file), by "page:line" of their fence, and why.
# None today: every block of the pages is a config or an inventory.
NOT_CONFIGS: dict[str, str] = {}


def yaml_blocks() -> list[tuple[str, str]]:
    """("page:line", text) of every ```yaml block of the pages."""
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in YAML_FENCE.finditer(text):
            where = f"{page.relative_to(REPO).as_posix()}:{text.count(chr(10), 0, m.start()) + 1}"
            blocks.append((where, m.group(1)))
    return blocks


BLOCKS = yaml_blocks()


def validated(block: str, base_dir: Path) -> ServeConfig | Inventory:
    """The block as `up --config` or `gateway --inventory` would take it (the pools' cross-checks
    included); ConfigError if either refuses."""
    data = yaml.safe_load(block)
    if isinstance(data, dict) and INVENTORY_KEY in data:
        return parse_inventory(data, "example", base_dir)
    return build_config(data, {})


@pytest.mark.parametrize(("where", "block"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_the_yaml_example_is_a_config_or_an_inventory(where: str, block: str, tmp_path: Path) -> None:
    if where in NOT_CONFIGS:
        pytest.skip(NOT_CONFIGS[where])
    assert isinstance(validated(block, tmp_path), (ServeConfig, Inventory)), where


def test_the_pages_have_yaml_examples_and_every_exception_is_one_of_them() -> None:
    assert len(BLOCKS) >= 10, "the pages' YAML examples are not found"
    assert set(NOT_CONFIGS) <= {where for where, _ in BLOCKS}, "an exception names no block"


def test_a_key_the_code_refuses_is_refused_here(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nginx\.prot"):
        validated("nginx: {prot: 8080}\n", tmp_path)
    with pytest.raises(ConfigError, match="inventory example"):
        validated("hosts: [{name: a}]\nnope: 1\n", tmp_path)
    with pytest.raises(ConfigError, match="is not another pool"):
        validated("pools: [{name: a, model: m, chimera_pool: zz}]\n", tmp_path)

"""A key's qa= option in the keys file: the answer checks' policy for its requests that name none."""

from __future__ import annotations

from pathlib import Path

import pytest

from hunyuan_serve.auth.keys import key_id, key_qa, load_key_specs
from hunyuan_serve.config import ConfigError


def test_a_key_names_its_policy_and_a_key_without_one_gets_the_pools(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("sk-careful qa=retry weight=2\nsk-plain\nsk-quiet qa=off\n")
    specs = load_key_specs(str(keys))
    assert (
        specs["sk-careful"].qa == "retry" and specs["sk-careful"].weight == 2 and specs["sk-plain"].qa is None
    )
    by_id = {key_id(key): spec for key, spec in specs.items()}
    assert key_qa(by_id) == {key_id("sk-careful"): "retry", key_id("sk-quiet"): "off"}


def test_a_qa_value_that_is_no_policy_names_the_line_and_the_choices(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("sk-one\nsk-two qa=loud\n")
    with pytest.raises(ConfigError, match=r"line 2: qa= takes off, flag, retry") as err:
        load_key_specs(str(keys))
    assert "sk-two" not in str(err.value)  # a refusal never shows the key

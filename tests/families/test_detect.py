"""The family of a checkpoint from its name, config and chat template; what `up --model DIR` picks."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hunyuan_serve.config import ConfigError
from hunyuan_serve.families.detect import (
    UnplacedCheckpoint,
    family_from_config,
    family_from_name,
    read_model_config,
)

DENSE = {"model_type": "hunyuan_v1_dense", "architectures": ["HunYuanDenseV1ForCausalLM"]}
HYV3 = {"model_type": "hy_v3", "architectures": ["HYV3ForCausalLM"]}
GEMMA = {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"]}


@pytest.mark.parametrize(
    ("model", "config", "expected"),
    [
        # The released checkpoints, by hub id (the model links tables of the three READMEs).
        ("tencent/Hunyuan-MT-7B", DENSE, "hunyuan-mt"),
        ("tencent/Hunyuan-MT-Chimera-7B", DENSE, "chimera"),
        ("tencent/Hunyuan-MT-Chimera-7B-fp8", {}, "chimera"),
        ("/tmp/pytest-0/tiny-chimera-0", DENSE, "chimera"),  # `tiny-model --family chimera` in tests
        ("tencent/Hunyuan-7B-MT", DENSE, "hunyuan-mt"),
        ("tencent/HY-MT1.5-1.8B", DENSE, "hy-mt1.5"),
        ("tencent/HY-MT1.5-1.8B-GPTQ-Int4", DENSE, "hy-mt1.5"),
        ("tencent/HY-MT1.5-7B-FP8", DENSE, "hy-mt1.5"),
        ("tencent/Hy-MT2-1.8B", DENSE, "hy-mt2"),
        ("tencent/Hy-MT2-7B-FP8", DENSE, "hy-mt2"),
        ("tencent/Hy-MT2-30B-A3B", HYV3, "hy-mt2"),
        ("tencent/Hy-MT2-30B-A3B-FP8", {}, "hy-mt2"),  # a hub id not downloaded yet: its name alone
        # Local directories named like each generation.
        ("/models/hy_mt1_5_7b", DENSE, "hy-mt1.5"),
        ("/models/hymt2-1.8b", DENSE, "hy-mt2"),
        ("/srv/hunyuan-mt-7b/", DENSE, "hunyuan-mt"),
        ("/work/hy-mt2-evals/HY-MT1.5-7B", DENSE, "hy-mt1.5"),  # the nearest component decides
        ("/data/Hy-MT2-30B-A3B/checkpoint-500", HYV3, "hy-mt2"),
        # The CPU demo model: Gemma 3 270M base, by an explicit rule on its architecture.
        ("/root/.cache/hunyuan-serve/models/gemma3-270m", GEMMA, "few-shot"),
        # A base model without any chat template cannot take chat prompts.
        (
            "/models/some-base",
            {"architectures": ["LlamaForCausalLM"], "_has_chat_template": False},
            "few-shot",
        ),
    ],
)
def test_auto_places_each_generation(model: str, config: dict[str, Any], expected: str) -> None:
    assert family_from_config("auto", config, model) == expected


@pytest.mark.parametrize(
    ("model", "config", "message"),
    [
        ("/models/checkpoint-500", DENSE, "cannot tell the prompt family of /models/checkpoint-500 "
         "(HunYuanDenseV1ForCausalLM): its name says no generation"),
        ("tencent/Hunyuan-7B-Instruct", DENSE, "its name says no generation"),
        ("/models/moe", HYV3, "(HYV3ForCausalLM)"),
        ("/models/qwen", {"architectures": ["Qwen3ForCausalLM"], "_has_chat_template": True}, "Qwen3"),
        ("/models/HY-MT1.5-1.8B", HYV3, "named like hy-mt1.5 but its architecture is HYV3ForCausalLM, "
         "not HunYuanDenseV1ForCausalLM"),
        ("/models/gemma-hy-mt2-distilled", GEMMA, "named like hy-mt2 but its architecture is Gemma3For"),
    ],
)  # fmt: skip
def test_a_checkpoint_no_rule_places_names_the_override(
    model: str, config: dict[str, Any], message: str
) -> None:
    with pytest.raises(UnplacedCheckpoint, match=re.escape(message)) as info:
        family_from_config("auto", config, model)
    assert "set engine.prompt_family (--prompt-family" in str(info.value)
    assert isinstance(info.value, ConfigError)  # the CLI prints it as a configuration error, exit 2


def test_the_override_wins_over_every_rule() -> None:
    assert family_from_config("hy-mt2", DENSE, "/models/checkpoint-500") == "hy-mt2"
    assert family_from_config("few-shot", DENSE, "tencent/Hunyuan-MT-7B") == "few-shot"
    assert family_from_config("hunyuan", GEMMA, "x") == "hunyuan-mt"  # the old name


def test_version_numbers_are_not_confused() -> None:
    assert family_from_name("hy-mt20") is None  # not "Hy-MT2" followed by something
    assert family_from_name("hy-mt1.55") is None
    assert family_from_name("hy-mt2.5") is None
    assert family_from_name("hunyuan-mtx") is None


def test_read_model_config_adds_name_and_chat_template(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(DENSE), encoding="utf-8")
    config = read_model_config(str(tmp_path))
    assert config["_name_or_path"] == str(tmp_path) and config["_has_chat_template"] is False
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": "{{ x }}"}), encoding="utf-8"
    )
    assert read_model_config(str(tmp_path))["_has_chat_template"] is True
    # The name travels in the config, so the caller's family_from_config(setting, config) keeps working.
    hub = read_model_config("tencent/HY-MT1.5-7B")
    assert hub == {"_name_or_path": "tencent/HY-MT1.5-7B"}
    assert family_from_config("auto", hub) == "hy-mt1.5"


def test_tiny_checkpoints_are_placed_by_their_directory_names(tiny_family_dirs: dict[str, Path]) -> None:
    # What `up --model DIR` / `replica --model DIR` resolve for each tiny generation (replica/command.py).
    expected = {
        "hunyuan-mt": "hunyuan-mt",
        "chimera": "chimera",
        "hy-mt1.5": "hy-mt1.5",
        "hy-mt2": "hy-mt2",
        "hy-mt2-moe": "hy-mt2",
    }
    for kind, path in tiny_family_dirs.items():
        assert family_from_config("auto", read_model_config(str(path))) == expected[kind], path

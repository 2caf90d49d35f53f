"""The family of a checkpoint: from its name or path, config.json and chat template, or the override."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from hunyuan_serve.config import ConfigError
from hunyuan_serve.families import CHIMERA, FAMILIES, FEW_SHOT, HUNYUAN_MT, HY_MT2, HY_MT15
from hunyuan_serve.families.base import PromptInputError
from hunyuan_serve.families.build import canonical_family

OVERRIDE_HINT = "set engine.prompt_family (--prompt-family on up and replica, or in the config file)"
# read_model_config adds these keys beside config.json's own: what the rules need besides the config.
NAME_KEY = "_name_or_path"
CHAT_TEMPLATE_KEY = "_has_chat_template"

# The three generations share HunYuanDenseV1 (model_type hunyuan_v1_dense), so their names tell them
# apart: HF ids tencent/Hunyuan-MT-7B, Hunyuan-MT-Chimera-7B, HY-MT1.5-1.8B(-FP8, -GPTQ-Int4), HY-MT1.5-7B,
# Hy-MT2-1.8B, Hy-MT2-7B, Hy-MT2-30B-A3B(-FP8). Matched on one path component, '_' read as '-'. The
# Chimera (Hunyuan-MT-Chimera-7B(-fp8), or any component naming chimera as a word, e.g. the tiny
# checkpoint's tiny-chimera-0) comes first: its name also says hunyuan-mt, but it takes another prompt.
NAME_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?<![a-z])chimera(?![a-z])"), CHIMERA),
    (re.compile(r"hy-?mt-?2(?![\d.])"), HY_MT2),
    (re.compile(r"hy-?mt-?1[.-]?5(?!\d)"), HY_MT15),
    (re.compile(r"hunyuan-(?:7b-)?mt(?![a-z])"), HUNYUAN_MT),
)
DENSE = "HunYuanDenseV1ForCausalLM"
HYV3 = "HYV3ForCausalLM"
# The architectures each generation was released in (the 30B-A3B is Hy-MT2's HYV3 MoE).
ARCHITECTURES = {HUNYUAN_MT: {DENSE}, CHIMERA: {DENSE}, HY_MT15: {DENSE}, HY_MT2: {DENSE, HYV3}}
# Base models that get few-shot prompts by rule: the CPU demo model is Gemma 3 270M *base*, whose
# checkpoint (converted from GGUF) carries Gemma's chat template although the model follows no chat.
FEW_SHOT_ARCHITECTURES = {"Gemma3ForCausalLM"}


class UnplacedCheckpoint(PromptInputError, ConfigError):
    """A checkpoint no rule places in a family; the message names the override."""


def family_from_name(name: str) -> str | None:
    """The family a checkpoint's name or path says, judging the last path component that says one."""
    for part in reversed(PurePosixPath(name.replace("\\", "/")).parts):
        key = part.lower().replace("_", "-")
        for pattern, family in NAME_RULES:
            if pattern.search(key):
                return family
    return None


def family_from_config(setting: str, model_config: Mapping[str, Any], model: str = "") -> str:
    """engine.prompt_family, or for 'auto' the family the checkpoint's name and config say (else raise)."""
    if setting.strip().lower() != "auto":
        return canonical_family(setting)
    name = model or str(model_config.get(NAME_KEY, ""))
    architectures = set(model_config.get("architectures") or ())
    family = family_from_name(name)
    if family is not None:
        if architectures and not architectures & ARCHITECTURES[family]:
            raise UnplacedCheckpoint(
                f"{name} is named like {family} but its architecture is {', '.join(sorted(architectures))}, "
                f"not {' or '.join(sorted(ARCHITECTURES[family]))}; {OVERRIDE_HINT}"
            )
        return family
    if architectures & FEW_SHOT_ARCHITECTURES or model_config.get(CHAT_TEMPLATE_KEY) is False:
        return FEW_SHOT  # a base model (or one without any chat template): completion prompts
    what = ", ".join(sorted(architectures)) or str(model_config.get("model_type", "")) or "no config.json"
    raise UnplacedCheckpoint(
        f"cannot tell the prompt family of {name or 'the model'} ({what}): its name says no generation "
        f"(Hunyuan-MT, Chimera, HY-MT1.5, Hy-MT2); {OVERRIDE_HINT} to one of {', '.join(FAMILIES)}"
    )


def read_model_config(model: str) -> dict[str, Any]:
    """config.json of a local checkpoint plus its name and whether it has a chat template; a hub id's name."""
    path = Path(model)
    config_file = path / "config.json"
    data: dict[str, Any] = {}
    if config_file.is_file():
        loaded = json.loads(config_file.read_text(encoding="utf-8"))
        data = loaded if isinstance(loaded, dict) else {}
        data[CHAT_TEMPLATE_KEY] = has_chat_template(path)
    data[NAME_KEY] = model
    return data


def has_chat_template(path: Path) -> bool:
    """Whether a checkpoint directory ships a chat template (file, or in tokenizer_config.json)."""
    if (path / "chat_template.jinja").is_file() or (path / "chat_template.json").is_file():
        return True
    tokenizer_config = path / "tokenizer_config.json"
    if not tokenizer_config.is_file():
        return False
    data = json.loads(tokenizer_config.read_text(encoding="utf-8"))
    return isinstance(data, dict) and bool(data.get("chat_template"))

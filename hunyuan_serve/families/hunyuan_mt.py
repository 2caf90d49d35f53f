"""Hunyuan-MT-7B and Hunyuan-MT-Chimera-7B (2025-09): two official templates, no instruction features."""

from __future__ import annotations

from hunyuan_serve.families.base import Features, Prompt, chinese_side, user_prompt
from hunyuan_serve.languages import Language

NAME = "hunyuan-mt"
FEATURES: tuple[str, ...] = ()

# Source: Tencent-Hunyuan/Hunyuan-MT, README.md, "Prompts":
# "Prompt Template for ZH<=>XX Translation."
ZH_TEMPLATE = "把下面的文本翻译成{target}，不要额外解释。\n\n{text}"
# "Prompt Template for XX<=>XX Translation, excluding ZH<=>XX."
EN_TEMPLATE = "Translate the following segment into {target}, without additional explanation.\n\n{text}"


def build(source: Language, target: Language, text: str, features: Features) -> Prompt:
    """The model card's user message: the Chinese template when Chinese is on either side."""
    del features  # this family has none; build_prompt rejected any before calling
    if chinese_side(source, target):
        return user_prompt(ZH_TEMPLATE.format(target=target.chinese_name, text=text))
    return user_prompt(EN_TEMPLATE.format(target=target.name, text=text))

"""Old import path of prompt building: re-exports from hunyuan_serve.families until every caller moves."""

from __future__ import annotations

from hunyuan_serve.families.base import Prompt
from hunyuan_serve.families.build import build_prompt, canonical_family
from hunyuan_serve.families.detect import family_from_config, read_model_config
from hunyuan_serve.families.few_shot import FEW_SHOT_EXAMPLES, few_shot_text

# A family name as FAMILIES spells it (old aliases accepted by build_prompt; see canonical_family).
Family = str

__all__ = [
    "FEW_SHOT_EXAMPLES",
    "Family",
    "Prompt",
    "build_prompt",
    "canonical_family",
    "family_from_config",
    "few_shot_text",
    "read_model_config",
]

"""Model families: each generation's prompt templates, features and recommended sampling, in one place.

Modules: base (Prompt, errors), hunyuan_mt / hy_mt15 / hy_mt2 / few_shot (each family's templates), chimera
(the fusion prompt), build (build_prompt), glossary, format_tags (<sn> tags), detect (the family of a
checkpoint), command.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# The families a checkpoint can belong to (engine.prompt_family picks one, "auto" detects it).
HUNYUAN_MT = "hunyuan-mt"
HY_MT15 = "hy-mt1.5"
HY_MT2 = "hy-mt2"
FEW_SHOT = "few-shot"
# Hunyuan-MT-Chimera-7B: fuses candidate translations into one; it has no plain translation prompt.
CHIMERA = "chimera"
FAMILIES = (HUNYUAN_MT, HY_MT15, HY_MT2, FEW_SHOT, CHIMERA)

# The model `up` serves on a GPU host when none is given.
DEFAULT_HUB_MODEL = "tencent/Hunyuan-MT-7B"


@dataclass(frozen=True)
class SamplingDefaults:
    """A model's recommended sampling (what a request gets for every field it does not send)."""

    temperature: float
    top_p: float
    top_k: int
    repetition_penalty: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# Hunyuan-MT-7B's README ("Inference" section): top_k 20, top_p 0.6, repetition_penalty 1.05,
# temperature 0.7. HY-MT1.5 recommends the same (Tencent-Hunyuan/HY-MT, README.md, after "Use with
# transformers"), and so does Hy-MT2 for 1.8B and 7B (Tencent-Hunyuan/Hy-MT2, README.md, "Inference and
# Deployment"; it adds max_tokens 4096, which the service's own token budget governs).
HUNYUAN_SAMPLING = SamplingDefaults(temperature=0.7, top_p=0.6, top_k=20, repetition_penalty=1.05)
# Hy-MT2-30B-A3B (the MoE) recommends plain sampling at temperature 0.7 (same README, "For 30B-A3B").
HY_MT2_MOE_SAMPLING = SamplingDefaults(temperature=0.7, top_p=1.0, top_k=-1, repetition_penalty=1.0)


def sampling_defaults(family: str, model: str = "") -> SamplingDefaults:
    """The recommended sampling of a family, per model size where its README differs."""
    if family == HY_MT2 and "30b" in model.lower():
        return HY_MT2_MOE_SAMPLING
    return HUNYUAN_SAMPLING


# Tokens of source text one prompt gets: a longer text is cut at paragraph, line, then sentence boundaries
# (hunyuan_serve/text/split.py) and its segments translated as one batch. Hunyuan-MT-7B drops lines of a
# long input (50 sentences in, 46 out: Hunyuan-MT issues #34 and #40) and a peer tool cuts at 150
# characters; 256 tokens is a few hundred characters of English, a paragraph or two. The smaller demo
# model gets half. Chimera fuses whole answers: it is never cut (0).
SEGMENT_TOKENS = {HUNYUAN_MT: 256, HY_MT15: 256, HY_MT2: 256, FEW_SHOT: 128, CHIMERA: 0}


def segment_tokens(family: str) -> int:
    """The family's segment target in tokens (replica.segment_tokens overrides it; 0: never cut)."""
    return SEGMENT_TOKENS.get(family, SEGMENT_TOKENS[HUNYUAN_MT])

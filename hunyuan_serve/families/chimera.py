"""Hunyuan-MT-Chimera-7B (2025-09): one prompt, fusing several candidate translations of a text into one."""

from __future__ import annotations

from collections.abc import Sequence

from hunyuan_serve.families.base import Features, Prompt, PromptInputError, user_prompt
from hunyuan_serve.languages import Language

NAME = "chimera"
FEATURES: tuple[str, ...] = ()

# Source: Tencent-Hunyuan/Hunyuan-MT, README.md, "Prompt Template for Hunyuan-MT-Chimera-7B", at
# https://github.com/Tencent-Hunyuan/Hunyuan-MT/blob/23380076a4e52ec332a75bb215db70928a8ed89d/README.md
# (README_CN.md there has the same block). Placeholders <source_language>, <target_language>,
# <source_text>, <translated_textN> are filled with English language names (the prompt is English) and
# the texts. The English README still writes one of them as `<target_language>` in "The multiple ...
# translations:", a Markdown leftover the Chinese README and every other placeholder have dropped
# (earlier revisions had backticks around all of them), so no backticks there. The triple backticks
# around the texts are the prompt's own ("surrounded in triple backticks"). The README shows six
# numbered candidates; each candidate is one such line, and the block ends after the last one (the
# newline before the code fence's end is its layout).
HEAD = (
    "Analyze the following multiple {target} translations of the {source} segment surrounded in triple "
    "backticks and generate a single refined {target} translation. Only output the refined translation, "
    "do not explain.\n\nThe {source} segment:\n```{text}```\n\nThe multiple {target} translations:\n"
)
CANDIDATE_LINE = "{n}. ```{candidate}```"

# How many candidates a fusion takes: the README's six by default; 2 to 8, as one alone has
# nothing to fuse and more only lengthen the prompt beyond what the model was shown.
DEFAULT_CANDIDATES = 6
MIN_CANDIDATES = 2
MAX_CANDIDATES = 8


class FusionOnly(PromptInputError):
    """A plain translation asked of the chimera family, which only fuses candidates."""


def check_count(count: int, field: str = "candidates") -> None:
    """A PromptInputError naming `field` unless count is within MIN_CANDIDATES..MAX_CANDIDATES."""
    if not MIN_CANDIDATES <= count <= MAX_CANDIDATES:
        raise PromptInputError(
            f"{field} must be {MIN_CANDIDATES} to {MAX_CANDIDATES} candidate translations, got {count}"
        )


def fusion_prompt(source: Language, target: Language, text: str, candidates: Sequence[str]) -> Prompt:
    """The README's user message: the source text, then each candidate numbered from 1."""
    check_count(len(candidates))
    head = HEAD.format(source=source.name, target=target.name, text=text)
    lines = (CANDIDATE_LINE.format(n=n, candidate=each) for n, each in enumerate(candidates, 1))
    return user_prompt(head + "\n".join(lines))


def build(source: Language, target: Language, text: str, features: Features) -> Prompt:
    """No plain translation: the Chimera is trained on the fusion prompt alone."""
    del source, target, text, features
    raise FusionOnly(
        "prompt family chimera (Hunyuan-MT-Chimera-7B) fuses candidate translations and has no prompt "
        "for translating a text alone: send the text with its candidates to POST /fuse"
    )

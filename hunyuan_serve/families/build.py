"""One entry point from (family, languages, text, features) to the Prompt, whichever the family."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.families import (
    CHIMERA,
    FAMILIES,
    FEW_SHOT,
    HUNYUAN_MT,
    chimera,
    few_shot,
    hunyuan_mt,
    hy_mt2,
    hy_mt15,
)
from hunyuan_serve.families.base import Features, FeatureUnsupported, Prompt, PromptInputError
from hunyuan_serve.families.glossary import parse_request_glossary, terms_in_text
from hunyuan_serve.languages import Language, find_language

Builder = Callable[[Language, Language, str, Features], Prompt]
_MODULES = {module.NAME: module for module in (hunyuan_mt, hy_mt15, hy_mt2, few_shot, chimera)}
BUILDERS: dict[str, Builder] = {name: module.build for name, module in _MODULES.items()}
FAMILY_FEATURES: dict[str, tuple[str, ...]] = {name: module.FEATURES for name, module in _MODULES.items()}
# The most tokens a chat that names no max_tokens is answered with, for the families whose model does not
# end a chat turn of its own (a base model's); the others' answers end at their end-of-turn token.
CHAT_MAX_TOKENS: dict[str, int] = {few_shot.NAME: few_shot.CHAT_MAX_TOKENS}
# The names engine.prompt_family took before the families were split by generation.
ALIASES = {"hunyuan": HUNYUAN_MT, "few_shot": FEW_SHOT}


@dataclass(frozen=True)
class Limits:
    """Bounds on a request's optional fields; ReplicaConfig's max_glossary_*, max_*_chars are their home."""

    glossary_terms: int
    term_chars: int
    context_chars: int
    style_chars: int


def feature_limits(cfg: ReplicaConfig) -> Limits:
    """The limits a replica with this config applies."""
    return Limits(
        cfg.max_glossary_terms, cfg.max_glossary_term_chars, cfg.max_context_chars, cfg.max_style_chars
    )


# For callers without a config (`hunyuan-serve prompt`, tests): the config's defaults.
DEFAULT_LIMITS = feature_limits(ReplicaConfig())


class UnknownFamily(PromptInputError):
    """A family name that is none of FAMILIES (nor an old alias)."""


def canonical_family(name: str) -> str:
    """The family's name as FAMILIES spells it; the old names 'hunyuan' and 'few_shot' are accepted."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in BUILDERS:
        raise UnknownFamily(f"unknown prompt family {name!r}; known: {', '.join(FAMILIES)}")
    return key


def families_with(feature: str) -> tuple[str, ...]:
    """The families that have an official prompt for a feature, in FAMILIES order."""
    return tuple(name for name in FAMILIES if feature in FAMILY_FEATURES[name])


def request_features(
    text: str,
    glossary: Any = None,
    context: str | None = None,
    style: str | None = None,
    preserve_format: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> Features:
    """Validate a request's optional fields; of the glossary only the terms found in the text remain."""
    terms = terms_in_text(parse_request_glossary(glossary, limits.glossary_terms, limits.term_chars), text)
    context, style = (context or "").strip(), (style or "").strip()
    if len(context) > limits.context_chars:
        raise PromptInputError(f"context is longer than {limits.context_chars} characters")
    if len(style) > limits.style_chars:
        raise PromptInputError(f"style is longer than {limits.style_chars} characters")
    return Features(terms=terms, context=context, style=style, preserve_format=preserve_format)


def check_features(family: str, features: Features) -> None:
    """Raise FeatureUnsupported for a feature the family lacks, or for two at once (no template has two)."""
    used = features.used()
    for feature in used:
        if feature not in FAMILY_FEATURES[family]:
            raise FeatureUnsupported(family, (feature,), families_with(feature))
    if len(used) > 1:
        raise FeatureUnsupported(family, used, ())


def build_prompt(
    family: str,
    source: Language,
    target: Language,
    text: str,
    glossary: Any = None,
    context: str | None = None,
    style: str | None = None,
    preserve_format: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> Prompt:
    """The prompt for one text in the family; a pure function of its arguments.

    Raises PromptInputError (FeatureUnsupported, GlossaryInvalid, UnknownFamily) with a message for a 400.
    """
    features = request_features(text, glossary, context, style, preserve_format, limits)
    return prompt_for(family, source, target, text, features)


def prompt_for(family: str, source: Language, target: Language, text: str, features: Features) -> Prompt:
    """The prompt for features already validated (of the glossary, the terms in this text): build_prompt's
    last step, for callers that parsed the fields once for many texts (the replica's batch)."""
    name = canonical_family(family)
    check_features(name, features)
    return BUILDERS[name](source, target, text, features)


# The probe a replica runs before it is ready and on a deep health check: a short en->zh translation,
# or for the Chimera (which has no plain prompt) the fusion of two candidates of it.
PROBE_CANDIDATES = ("你好，世界。", "世界，你好。")


def probe_prompt(family: str, text: str) -> Prompt:
    """The family's prompt for translating `text` from English into Chinese (the warm-up, deep health)."""
    source, target = find_language("en"), find_language("zh")
    if canonical_family(family) == CHIMERA:
        return chimera.fusion_prompt(source, target, text, PROBE_CANDIDATES)
    return build_prompt(family, source, target, text)

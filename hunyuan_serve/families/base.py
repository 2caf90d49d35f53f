"""What every family shares: the Prompt the engine gets, a request's features, and the typed input errors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hunyuan_serve.languages import Language, is_chinese

# Feature names, as the API and the error messages spell them.
GLOSSARY = "glossary"
CONTEXT = "context"
STYLE = "style"
PRESERVE_FORMAT = "preserve_format"
FEATURES = (GLOSSARY, CONTEXT, STYLE, PRESERVE_FORMAT)


# A family name as FAMILIES spells it (old aliases accepted by build_prompt; see canonical_family).
Family = str


@dataclass(frozen=True)
class Prompt:
    """What the engine gets: chat messages (rendered by the tokenizer's template) or raw completion text."""

    messages: tuple[dict[str, str], ...] = ()
    text: str = ""
    stop: tuple[str, ...] = ()

    @property
    def is_chat(self) -> bool:
        return bool(self.messages)


def user_prompt(content: str) -> Prompt:
    """A chat prompt of one user message: every official template is a single user turn, no system prompt."""
    return Prompt(messages=({"role": "user", "content": content},))


class PromptInputError(ValueError):
    """Input the prompt cannot be built from; the message is meant for the client (HTTP 400)."""


class FeatureUnsupported(PromptInputError):
    """Features (FEATURES names) the family has no official prompt for, alone or together; names them
    and the families that have one."""

    def __init__(self, family: str, features: tuple[str, ...], supported_by: tuple[str, ...]) -> None:
        self.family = family
        self.features = features
        self.supported_by = supported_by
        super().__init__(self.message())

    def message(self, names: Mapping[str, str] | None = None) -> str:
        """The refusal with each feature called as `names` says (an API's own parameter, e.g. DeepL's
        custom_instructions for style), else by its own name."""
        named = " together with ".join((names or {}).get(feature, feature) for feature in self.features)
        lacks = f"prompt family {self.family} has no official prompt for {named}"
        if not self.supported_by:  # two at once: every official template takes one of them
            return f"{lacks}; no family has one (each official prompt takes one of them at a time)"
        return f"{lacks}; families that have one: {', '.join(self.supported_by)}"


class GlossaryInvalid(PromptInputError):
    """A glossary that is malformed or over the limits; the message names the entry and the limit."""


@dataclass(frozen=True)
class Features:
    """The optional instructions of one request, already validated (terms: only those in the text)."""

    terms: tuple[tuple[str, str], ...] = ()
    context: str = ""
    style: str = ""
    preserve_format: bool = False

    def used(self) -> tuple[str, ...]:
        """The names of the features this request asks for, in FEATURES order."""
        flags = (bool(self.terms), bool(self.context), bool(self.style), self.preserve_format)
        return tuple(name for name, on in zip(FEATURES, flags, strict=True) if on)


def chinese_side(source: Language, target: Language) -> bool:
    """ZH<=>XX in the READMEs' headings: Chinese (Simplified or Traditional) on either side."""
    return is_chinese(source) or is_chinese(target)

"""What every family shares: the Prompt the engine gets, a request's features, and the typed input errors."""

from __future__ import annotations

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
    """A feature the family has no official prompt for; names the feature and the families that have it."""

    def __init__(self, family: str, feature: str, supported_by: tuple[str, ...]) -> None:
        have = ", ".join(supported_by) if supported_by else "no family"
        super().__init__(
            f"prompt family {family} has no official prompt for {feature}; families that have one: {have}"
        )
        self.family = family
        self.feature = feature
        self.supported_by = supported_by


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

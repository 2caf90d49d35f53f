"""CLDR plural categories of a target language (Babel's CLDR data): i18next, Android and .xcstrings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from hunyuan_serve.text.placeholders import find_placeholders

# CLDR's order of the categories, the order the formats write them in.
CATEGORIES = ("zero", "one", "two", "few", "many", "other")


@lru_cache(maxsize=64)
def categories(language: str | None) -> tuple[str, ...]:
    """The plural categories CLDR gives language (always ending in "other"); English's when unknown.

    gettext keeps its own table (gettext.PLURAL_FORMS): its nplurals follow gettext's conventions,
    which are not CLDR's categories (Russian: three msgstr forms, four CLDR categories).
    """
    from babel import Locale, UnknownLocaleError

    try:
        tags = Locale.parse((language or "en").replace("-", "_")).plural_form.tags
    except (UnknownLocaleError, ValueError):
        tags = frozenset({"one"})
    return tuple(c for c in CATEGORIES if c in tags or c == "other")


def source_for(category: str, forms: Mapping[str, str], target: str | None = None) -> str:
    """The source category a target category is translated from: the same one, else "other".

    "one" covers more than n == 1 in some languages (Russian: 21, 31...; French: 0): there the
    source's "one" serves only when it holds the same placeholders as its "other" (else "1 file"
    would read for 21 files).
    """
    if category == "one" and "one" in forms:
        same = _placeholders(forms["one"]) == _placeholders(forms.get("other", forms["one"]))
        return "one" if same or _one_is_only_1(target) else _fallback(forms)
    return category if category in forms else _fallback(forms)


def _fallback(forms: Mapping[str, str]) -> str:
    return "other" if "other" in forms else next(iter(forms))


@lru_cache(maxsize=64)
def _one_is_only_1(language: str | None) -> bool:
    """Whether the language's "one" holds the integer 1 and no other (English, German, ...)."""
    from babel import Locale, UnknownLocaleError

    try:
        rule = Locale.parse((language or "en").replace("-", "_")).plural_form
    except (UnknownLocaleError, ValueError):
        return True
    return all((rule(n) == "one") == (n == 1) for n in range(0, 1001))


def _placeholders(text: str) -> list[str]:
    return sorted(p.text for p in find_placeholders(text))


def plan_forms(forms: Mapping[str, str], target: str | None) -> list[tuple[str, str]]:
    """(target category, source category) for each of the target's categories."""
    return [(category, source_for(category, forms, target)) for category in categories(target)]


def needed_sources(plan: Sequence[tuple[str, str]]) -> list[str]:
    """The source categories a plan reads, each once, in CLDR order."""
    used = {source for _, source in plan}
    return sorted(used, key=lambda c: CATEGORIES.index(c) if c in CATEGORIES else len(CATEGORIES))


@dataclass(frozen=True)
class Reshape:
    """How a source's plural forms become the target's: forms kept, added and dropped."""

    keep: dict[str, str]  # a source form's category -> the category whose translation it takes
    add: list[tuple[str, str]]  # (a category the source lacks, the category it is translated from)
    drop: list[str]  # source categories the target language does not have


def reshape(forms: Mapping[str, str], target: str | None) -> Reshape:
    """The target's CLDR categories from the source's forms (no target: every form kept as it is)."""
    if target is None:
        return Reshape({c: c for c in forms}, [], [])
    plan = dict(plan_forms(forms, target))
    return Reshape(
        {c: s for c, s in plan.items() if c in forms},
        [(c, s) for c, s in plan.items() if c not in forms],
        [c for c in forms if c not in plan],
    )

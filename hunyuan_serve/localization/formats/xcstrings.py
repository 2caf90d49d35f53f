"""Apple String Catalogs (.xcstrings, JSON): the source language's values into the target's stringUnits."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hunyuan_serve.localization.formats.base import Document, FormatError, Options
from hunyuan_serve.localization.formats.plurals import needed_sources, plan_forms

# Xcode's names for the service's codes where they differ (Xcode writes Simplified Chinese zh-Hans).
_APPLE_CODES = {"zh": "zh-Hans", "zh-CN": "zh-Hans", "zh-TW": "zh-Hant"}
TRANSLATED, NEEDS_REVIEW = "translated", "needs_review"


@dataclass(frozen=True)
class _Entry:
    """One string to translate: its key, the target's plural plan (None: a single stringUnit), segments."""

    key: str
    plan: tuple[tuple[str, str], ...] | None  # (target category, source category)
    sources: tuple[str, ...]  # source categories, one segment each (a single string: ("",))
    first: int  # index of its first segment


def parse_xcstrings(content: str, options: Options) -> Document:
    """Each key's source value (its plural forms: the target's CLDR categories) is a segment.

    Keys marked shouldTranslate false, keys whose target already has a value (unless overwrite) and
    keys with substitutions or device variations (not a plain or plural string) are left as they are.
    """
    data = _load(content)
    source = str(data.get("sourceLanguage") or options.source or "en")
    target = _APPLE_CODES.get(options.target or "", options.target)
    entries: list[_Entry] = []
    segments: list[str] = []
    labels: list[str] = []
    for key, entry in data["strings"].items():
        found = _source_forms(key, entry, source) if target and _wanted(entry, target, options) else None
        if found is None:
            continue
        plan = None if "" in found else tuple(plan_forms(found, target))
        sources = ("",) if plan is None else tuple(needed_sources(plan))
        entries.append(_Entry(key, plan, sources, len(segments)))
        segments.extend(found[name] for name in sources)
        labels.extend(key if not name else f"{key}[{name}]" for name in sources)
    slashes = "\\/" in content  # JSONSerialization's escaped slash, where the file has it

    def rebuild(
        translations: Sequence[str], failed: frozenset[int], flagged: frozenset[int] = frozenset()
    ) -> str:
        if not entries or target is None:
            return content
        out = copy.deepcopy(data)
        for item in entries:
            # A flagged translation is written for review, as one refused keeps its source for review.
            units = {
                name: _unit(translations[item.first + i], item.first + i in failed | flagged)
                for i, name in enumerate(item.sources)
            }
            _set_target(out["strings"][item.key], target, item.plan, units)
        return dump_xcode(out, escape_slashes=slashes)

    return Document(
        "xcstrings", tuple(segments), tuple(labels), rebuild, review=rebuild, review_state=NEEDS_REVIEW
    )


def _load(content: str) -> dict[str, Any]:
    try:
        data = json.loads(content)
    except json.JSONDecodeError as err:
        raise FormatError(f"not valid JSON: {err.msg} (column {err.colno})", err.lineno) from None
    if not isinstance(data, dict) or not isinstance(data.get("strings"), dict):
        raise FormatError('a String Catalog is a JSON object with a "strings" object')
    for key, entry in data["strings"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("localizations", {}), dict):
            raise FormatError(f"string {key!r}: expected an object with a localizations object")
    return data


def _wanted(entry: dict[str, Any], target: str, options: Options) -> bool:
    if entry.get("shouldTranslate") is False:
        return False
    existing = entry.get("localizations", {}).get(target)
    return options.overwrite or not (isinstance(existing, dict) and _has_value(existing))


def _has_value(localization: dict[str, Any]) -> bool:
    unit = localization.get("stringUnit")
    return bool(localization.get("variations")) or (isinstance(unit, dict) and bool(unit.get("value")))


def _source_forms(key: str, entry: dict[str, Any], source: str) -> dict[str, str] | None:
    """{"": value} for a plain string, {category: value} for plural variations; None: nothing to do."""
    localization = entry.get("localizations", {}).get(source)
    if localization is None:  # Xcode's extracted strings: the key is the source text
        return {"": key} if key.strip() else None
    if not isinstance(localization, dict) or "substitutions" in localization:
        return None
    variations = localization.get("variations")
    if isinstance(variations, dict):
        plural = variations.get("plural") if set(variations) == {"plural"} else None
        if not isinstance(plural, dict):
            return None
        forms = {name: _value(form) for name, form in plural.items()}
        return {name: text for name, text in forms.items() if text} or None
    text = _value(localization)
    return {"": text} if text else None


def _value(holder: Any) -> str:
    unit = holder.get("stringUnit") if isinstance(holder, dict) else None
    value = unit.get("value") if isinstance(unit, dict) else None
    return value if isinstance(value, str) else ""


def _unit(text: str, review: bool) -> dict[str, Any]:
    # A translation refused for its placeholders keeps the source text, flagged for a translator.
    return {"stringUnit": {"state": NEEDS_REVIEW if review else TRANSLATED, "value": text}}


def _set_target(
    entry: dict[str, Any],
    target: str,
    plan: tuple[tuple[str, str], ...] | None,
    units: dict[str, dict[str, Any]],
) -> None:
    localizations: dict[str, Any] = entry.setdefault("localizations", {})
    was_sorted = list(localizations) == sorted(localizations)
    localization = localizations.get(target)
    localization = dict(localization) if isinstance(localization, dict) else {}
    localization.pop("stringUnit", None)
    localization.pop("variations", None)
    if plan is None:
        localization.update(units[""])
    else:
        plural = {category: copy.deepcopy(units[source]) for category, source in plan}
        localization["variations"] = {"plural": dict(sorted(plural.items()))}
    localizations[target] = dict(sorted(localization.items()))  # Xcode writes keys sorted
    if was_sorted:
        entry["localizations"] = dict(sorted(localizations.items()))


def dump_xcode(value: Any, indent: str = "", escape_slashes: bool = False) -> str:
    """JSON as Xcode writes a String Catalog: 2-space indents, " : ", an empty object as two lines."""
    inner = indent + "  "
    if isinstance(value, dict):
        if not value:
            return "{\n\n" + indent + "}"
        items = (
            f"{inner}{_string(str(k), escape_slashes)} : {dump_xcode(v, inner, escape_slashes)}"
            for k, v in value.items()
        )
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list):
        if not value:
            return "[\n\n" + indent + "]"
        return (
            "[\n"
            + ",\n".join(inner + dump_xcode(v, inner, escape_slashes) for v in value)
            + "\n"
            + indent
            + "]"
        )
    if isinstance(value, str):
        return _string(value, escape_slashes)
    return json.dumps(value)


def _string(text: str, escape_slashes: bool) -> str:
    out = json.dumps(text, ensure_ascii=False)
    return out.replace("/", "\\/") if escape_slashes else out

"""DeepL's GET /v3/languages?resource=...: each language, usable as source and target, with its features."""

from __future__ import annotations

from typing import Any

from hunyuan_serve.families.base import GLOSSARY
from hunyuan_serve.families.build import FAMILY_FEATURES
from hunyuan_serve.replica.apis import codes

# The resources this server has (developers.deepl.com/docs/languages/using-the-languages-api, "Resources
# list"): text translation, document translation, glossaries. Weblate's DeepL backend asks translate_text
# for its language pairs and glossary for the glossary pairs (weblate/machinery/deepl.py, 2026.10.1).
RESOURCES = ("translate_text", "translate_document", "glossary")
# DeepL's other resources: known, with no language here (an empty list, which Weblate reads as "no
# language has it", as it reads a 404 for write).
ABSENT = ("voice", "write", "style_rules")


def languages_of(resource: str, family: str) -> list[dict[str, Any]]:
    """The languages of a resource as DeepL's v3 lists them: one entry per code (sources' ZH and the
    regional targets), features an object whose keys are the features the pair's languages have
    (DeepL's migration guide: "formality" key present in the features object); never formality, which
    the model has no control of."""
    if resource in ABSENT:
        return []
    glossary = GLOSSARY in FAMILY_FEATURES[family]
    features: dict[str, dict[str, Any]] = {}
    if resource != "glossary":
        features = {"tag_handling": {}, **({"glossary": {}} if glossary else {})}
    entries: dict[str, dict[str, Any]] = {}
    for kind in ("source", "target"):
        for item in codes.deepl_languages(kind):
            code = str(item["language"])
            entry = entries.setdefault(
                code,
                {
                    "lang": code,
                    "name": item["name"],
                    "usable_as_source": False,
                    "usable_as_target": False,
                    "features": dict(features),
                },
            )
            entry[f"usable_as_{kind}"] = True
    if resource != "glossary":
        for entry in entries.values():
            if entry["usable_as_source"]:
                entry["features"]["auto_detection"] = {}
    return list(entries.values())


def known_resource(resource: str | None) -> str | None:
    """The resource asked for, or None when it is missing or one this server does not have."""
    return resource if resource in RESOURCES or resource in ABSENT else None

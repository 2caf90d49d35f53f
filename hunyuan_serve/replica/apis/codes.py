"""Each compatible API's spelling of our 38 languages, both ways (ours are the model card's codes)."""

from __future__ import annotations

from hunyuan_serve.languages import LANGUAGES, Language, find_language

# LibreTranslate (libretranslate/language.py: model2iso/iso2model) answers zh-Hans and zh-Hant and reads
# its model codes zh, zt and pb as well; every other code is ISO 639 as ours.
_LIBRE_OUT = {"zh": "zh-Hans", "zh-Hant": "zh-Hant"}
_LIBRE_IN = {"zt": "zh-Hant", "pb": "pt"}
# DeepL v2 (developers.deepl.com, "Supported languages"): uppercase; regional targets for English,
# Portuguese and Chinese; one source code ZH for both Chinese scripts (the text's script tells which).
_DEEPL_TARGETS = {
    "en": ("EN-GB", "EN-US"),
    "pt": ("PT-BR", "PT-PT"),
    "zh": ("ZH-HANS",),
    "zh-Hant": ("ZH-HANT",),
}
_DEEPL_SOURCE = {"zh-Hant": "ZH"}
_DEEPL_NAMES = {
    "EN-GB": "English (British)",
    "EN-US": "English (American)",
    "PT-BR": "Portuguese (Brazilian)",
    "PT-PT": "Portuguese (European)",
    "ZH-HANS": "Chinese (simplified)",
    "ZH-HANT": "Chinese (traditional)",
}
# Immersive Translate's custom-API language list (immersivetranslate.com docs: services/custom).
_IMMERSIVE_OUT = {"zh": "zh-CN", "zh-Hant": "zh-TW", "tl": "fil"}


def libre_code(lang: Language) -> str:
    return _LIBRE_OUT.get(lang.code, lang.code)


def libre_language(code: str) -> Language:
    """A LibreTranslate code (zh-Hans, zt, pb...) or any of ours; UnknownLanguage otherwise."""
    return find_language(_LIBRE_IN.get(code.strip().lower(), code))


def deepl_source_code(lang: Language) -> str:
    return _DEEPL_SOURCE.get(lang.code, lang.code.upper())


def deepl_language(code: str) -> Language:
    """A DeepL code (EN-US, PT-BR, ZH-HANS, ZH-HANT, ZH, DE...) case-insensitively; UnknownLanguage else."""
    return find_language(code)


def deepl_languages(kind: str) -> list[dict[str, object]]:
    """GET /v2/languages: sources (one ZH) or targets (regional variants), as DeepL lists them."""
    if kind == "source":
        seen: dict[str, str] = {}
        for lang in LANGUAGES:
            seen.setdefault(deepl_source_code(lang), "Chinese" if lang.code == "zh-Hant" else lang.name)
        return [{"language": code, "name": name} for code, name in seen.items()]
    targets: list[dict[str, object]] = []
    for lang in LANGUAGES:
        for code in _DEEPL_TARGETS.get(lang.code, (lang.code.upper(),)):
            name = _DEEPL_NAMES.get(code, lang.name)
            targets.append({"language": code, "name": name, "supports_formality": False})
    return targets


def immersive_code(lang: Language) -> str:
    return _IMMERSIVE_OUT.get(lang.code, lang.code)

"""The 38 languages of Hunyuan-MT's model card, with English, Chinese and native names and alias lookup."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Language:
    """One supported language: its model-card code and the names prompts and the UI use."""

    code: str
    name: str
    chinese_name: str
    native_name: str


# Order, codes, English and Chinese names as in the Hunyuan-MT-7B model card's language table.
LANGUAGES: tuple[Language, ...] = (
    Language("zh", "Chinese", "中文", "中文"),
    Language("en", "English", "英语", "English"),
    Language("fr", "French", "法语", "Français"),
    Language("pt", "Portuguese", "葡萄牙语", "Português"),
    Language("es", "Spanish", "西班牙语", "Español"),
    Language("ja", "Japanese", "日语", "日本語"),
    Language("tr", "Turkish", "土耳其语", "Türkçe"),
    Language("ru", "Russian", "俄语", "Русский"),
    Language("ar", "Arabic", "阿拉伯语", "العربية"),
    Language("ko", "Korean", "韩语", "한국어"),
    Language("th", "Thai", "泰语", "ไทย"),
    Language("it", "Italian", "意大利语", "Italiano"),
    Language("de", "German", "德语", "Deutsch"),
    Language("vi", "Vietnamese", "越南语", "Tiếng Việt"),
    Language("ms", "Malay", "马来语", "Bahasa Melayu"),
    Language("id", "Indonesian", "印尼语", "Bahasa Indonesia"),
    Language("tl", "Filipino", "菲律宾语", "Filipino"),
    Language("hi", "Hindi", "印地语", "हिन्दी"),
    Language("zh-Hant", "Traditional Chinese", "繁体中文", "繁體中文"),
    Language("pl", "Polish", "波兰语", "Polski"),
    Language("cs", "Czech", "捷克语", "Čeština"),
    Language("nl", "Dutch", "荷兰语", "Nederlands"),
    Language("km", "Khmer", "高棉语", "ខ្មែរ"),
    Language("my", "Burmese", "缅甸语", "မြန်မာ"),
    Language("fa", "Persian", "波斯语", "فارسی"),
    Language("gu", "Gujarati", "古吉拉特语", "ગુજરાતી"),
    Language("ur", "Urdu", "乌尔都语", "اردو"),
    Language("te", "Telugu", "泰卢固语", "తెలుగు"),
    Language("mr", "Marathi", "马拉地语", "मराठी"),
    Language("he", "Hebrew", "希伯来语", "עברית"),
    Language("bn", "Bengali", "孟加拉语", "বাংলা"),
    Language("ta", "Tamil", "泰米尔语", "தமிழ்"),
    Language("uk", "Ukrainian", "乌克兰语", "Українська"),
    Language("bo", "Tibetan", "藏语", "བོད་ཡིག"),
    Language("kk", "Kazakh", "哈萨克语", "Қазақ тілі"),
    Language("mn", "Mongolian", "蒙古语", "Монгол"),
    Language("ug", "Uyghur", "维吾尔语", "ئۇيغۇرچە"),
    Language("yue", "Cantonese", "粤语", "粵語"),
)

# Codes other tools send for the same language (BCP 47 regions/scripts, legacy ISO codes, UI habits).
ALIASES: dict[str, str] = {
    "zh-cn": "zh",
    "zh-sg": "zh",
    "zh-my": "zh",
    "zh-hans": "zh",
    "zh-hans-cn": "zh",
    "zh-chs": "zh",
    "cn": "zh",
    "chs": "zh",
    "cmn": "zh",
    "zho": "zh",
    "chi": "zh",
    "simplified chinese": "zh",
    "zh-tw": "zh-Hant",
    "zh-hk": "zh-Hant",
    "zh-mo": "zh-Hant",
    "zh-hant-tw": "zh-Hant",
    "zh-hant-hk": "zh-Hant",
    "zh-cht": "zh-Hant",
    "cht": "zh-Hant",
    "tw": "zh-Hant",
    "yue-hk": "yue",
    "zh-yue": "yue",
    "en-us": "en",
    "en-gb": "en",
    "pt-br": "pt",
    "pt-pt": "pt",
    "es-419": "es",
    "es-mx": "es",
    "fr-ca": "fr",
    "fil": "tl",
    "iw": "he",
    "in": "id",
    "jp": "ja",
    "kr": "ko",
    "ua": "uk",
    "vn": "vi",
    "tib": "bo",
    "uig": "ug",
}


class UnknownLanguage(ValueError):
    """A language code that is not among the supported ones; the message lists those."""

    def __init__(self, code: str) -> None:
        supported = ", ".join(lang.code for lang in LANGUAGES)
        super().__init__(f"unsupported language {code!r}; supported: {supported}")
        self.code = code


def _build_index() -> dict[str, Language]:
    index: dict[str, Language] = {}
    by_code = {lang.code: lang for lang in LANGUAGES}
    for lang in LANGUAGES:
        index[lang.code.lower()] = lang
        index[lang.name.lower()] = lang
    for alias, code in ALIASES.items():
        index[alias] = by_code[code]
    return index


_INDEX = _build_index()  # immutable lookup table built once from constants; holds no state


def normalize_key(code: str) -> str:
    """Lower-case, '_' to '-', surrounding whitespace removed: 'zh_TW ' -> 'zh-tw'."""
    return code.strip().replace("_", "-").lower()


def find_language(code: str) -> Language:
    """The language for a code, alias or English name, matched case-insensitively."""
    lang = _INDEX.get(normalize_key(code))
    if lang is None:
        raise UnknownLanguage(code)
    return lang


def is_chinese(lang: Language) -> bool:
    """Simplified or Traditional Chinese: the model card's Chinese-prompt languages."""
    return lang.code in ("zh", "zh-Hant")


# A request's source before detection (hunyuan_serve.detect): never among LANGUAGES nor found by
# find_language, so it cannot reach a prompt unnoticed (the translation core refuses it).
AUTO = Language("auto", "Detect language", "自动检测", "auto")


def is_auto(code: str) -> bool:
    """Whether a source code asks for detection: 'auto' in any case, as LibreTranslate and others send it."""
    return normalize_key(code) == "auto"

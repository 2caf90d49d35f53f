"""What a translation must carry over as it is (URLs, placeholders, tags, numbers), found in a text."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

# A URL runs to the first space, quote or bracket; trailing sentence punctuation is not part of it.
URL = re.compile(
    r"(?:https?|ftp)://[^\s<>\"'()\[\]{}]+|www\.[^\s<>\"'()\[\]{}]+\.[a-z]{2,}[^\s<>\"'()\[\]{}]*"
)
_URL_TAIL = ".,;:!?。，；：！？"
# printf (%s, %d, %1$s, %(name)s, %@; not its space flag, or "50% of" would be one), Python, ICU and
# i18next braces ({0}, {name}, {{count}}), Jinja's {% tags %}, ${shell}.
PLACEHOLDER = re.compile(
    r"%(?:\d+\$|\([A-Za-z_][\w.]*\))?[-+#0]*\d*(?:\.\d+)?[sdifgeEuxXoc@]"
    r"|\{\{[^{}\n]*\}\}|\{%[^\n]*?%\}|\{[\w.\-]*(?:,[^{}]*)?\}|\$\{[\w.\-]+\}"
)
# An HTML or XML tag, its name: what markup must come back (attributes may be translated, e.g. alt).
TAG = re.compile(r"</?\s*([A-Za-z][\w:.-]*)(?:\s[^<>]*)?/?\s*>")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# An identifier (snake_case, dotted.name, a --flag): code that stays as it is, not words.
IDENTIFIER = re.compile(r"\b\w+_\w*|\b\w+(?:\.\w+)+\b|(?<!\w)--?\w[\w-]*")
# Code inside a code span, which must come back as it is (quoted any way); a span of plain words
# (`Sampling method`) names a UI label, which a translation translates.
_CODE_LIKE = re.compile(r"[_=./\\:()\[\]<>{}$#@-]|\d")
# A number: digits in groups of three ("1,000", "1.000.000"), then a decimal part ("0.5", "2,75");
# "0,0,0" is three numbers, "3 000" two.
_DIGITS = r"\d{1,3}(?:[.,]\d{3})+(?!\d)(?:[.,]\d+)?|\d+(?:[.,]\d+)?"
NUMBER = re.compile(_DIGITS)
_ANY_DIGIT = re.compile(r"\d")
# A number of its own: not part of a word (img2img, mk2, 1st, 5th, v1.1.4, Size-1), which a translation
# may rewrite.
_STANDALONE = re.compile(rf"(?<![\w.,])(?<!\w-)(?:{_DIGITS})(?![\w]|[.,]\d)")
# Small numbers a Chinese or Japanese answer may write in its own numerals ("3-column": 三列).
_CJK_NUMERALS = {"0": "零〇", "1": "一", "2": "二两", "3": "三", "4": "四", "5": "五", "6": "六"}
_CJK_NUMERALS |= {"7": "七", "8": "八", "9": "九", "10": "十"}


def normalized(text: str) -> str:
    """NFKC: full-width digits and letters (１２３, ＡＢＣ) compare equal to their ASCII forms."""
    return unicodedata.normalize("NFKC", text)


def urls(text: str) -> Counter[str]:
    return Counter(match.group().rstrip(_URL_TAIL) for match in URL.finditer(text))


def placeholders(text: str) -> Counter[str]:
    return Counter(match.group().replace(" ", "") for match in PLACEHOLDER.finditer(_without_urls(text)))


def tags(text: str) -> Counter[str]:
    """Each tag by its name and kind: `<b>`, `</b>`, `<br/>` (attributes ignored)."""
    found: Counter[str] = Counter()
    for match in TAG.finditer(text):
        whole = match.group()
        closing, empty = whole.startswith("</"), whole.rstrip(">").rstrip().endswith("/")
        found[f"<{'/' if closing else ''}{match.group(1).lower()}{'/' if empty else ''}>"] += 1
    return found


def code_missing(source: str, output: str) -> list[str]:
    """The code spans of the source (`x_y`, `a.py`) whose code is nowhere in the answer."""
    spans = dict.fromkeys(span for span in CODE_SPAN.findall(source) if _CODE_LIKE.search(span))
    return [f"`{span}`" for span in spans if span not in output]


def numbers(text: str, standalone: bool = False) -> Counter[str]:
    """The numbers outside URLs and placeholders, separators dropped: 1,000 and 1000 are one number.
    standalone: only those not part of a word (what a source must see come back)."""
    plain = _without_urls(PLACEHOLDER.sub(" ", normalized(text)))
    pattern = _STANDALONE if standalone else NUMBER
    return Counter(_value(match.group()) for match in pattern.finditer(plain))


def _value(number: str) -> str:
    """One spelling per value: groups joined, the decimal part after "." without trailing zeros
    (1,000 = 1.000 = 1000; 1.0 = 1; 2,50 = 2.5)."""
    parts = re.split(r"[.,]", number)
    if len(parts) > 1 and len(parts[-1]) != 3:  # a decimal part; three digits after it: a group
        whole, fraction = "".join(parts[:-1]), parts[-1].rstrip("0")
    else:
        whole, fraction = "".join(parts), ""
    return f"{whole}.{fraction}" if fraction else whole


def numbers_missing(source: str, output: str) -> list[str]:
    """The source's own numbers that the answer lacks (in digits, or a small one in CJK numerals)."""
    wanted = numbers(source, standalone=True)
    if not wanted:
        return []
    lost = missing(wanted, numbers(output))
    return [item for item in lost if not any(char in output for char in _CJK_NUMERALS.get(item, ""))]


def _without_urls(text: str) -> str:
    return URL.sub(" ", text)


# Each pattern with the characters one of its matches must hold: a text without them is not scanned.
_PROSE: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (URL, frozenset("/.")),
    (CODE_SPAN, frozenset("`")),
    (TAG, frozenset("<")),
    (PLACEHOLDER, frozenset("%{$")),
    (IDENTIFIER, frozenset("_.-")),
)


def prose(text: str) -> str:
    """The text without what is carried over as it is (URLs, placeholders, tags, code): its words."""
    present = set(text)
    for pattern, needs in _PROSE:
        if needs & present:
            text = pattern.sub(" ", text)
    return text


def might_hold(text: str) -> dict[str, bool]:
    """Which kinds of kept items the text may hold at all (the cheap test before their patterns)."""
    return {
        "numbers": _ANY_DIGIT.search(text) is not None,
        "urls": "/" in text or "www." in text,
        "placeholders": "%" in text or "{" in text or "$" in text,
        "markup": "<" in text or "`" in text,
    }


def missing(source: Counter[str], output: Counter[str]) -> list[str]:
    """What the source has more often than the output, each once, in the source's order."""
    return [item for item, count in source.items() if output[item] < count]

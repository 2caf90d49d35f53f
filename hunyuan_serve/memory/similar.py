"""How alike two segments are (0-100), and the best matches of a text among many, with rapidfuzz.

The unit of comparison is a token: a CJK character (those scripts write words without spaces, so a
character is what a changed word changes), a word elsewhere, a placeholder ({name}, %s, %(n)d, <b>)
whole, or one punctuation mark. Each distinct token is mapped to one private-use character, so that
rapidfuzz's Indel ratio (its `fuzz.ratio`: 100 * (1 - edits / total length)) over these strings is a
token-level ratio at the speed of its character-level C++ code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from rapidfuzz import fuzz, process

_SPACELESS = "\u0e00-\u0fff\u1000-\u109f\u1780-\u17ff\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_TOKEN = re.compile(
    r"\{[^{}\s]*\}"  # {name}, {0}
    r"|%(?:\([^)\s]*\))?[-#0 +]*\d*(?:\.\d+)?[a-zA-Z]"  # printf: %s, %(count)d, %.2f
    r"|<[^<>\s][^<>]*>"  # markup
    rf"|[{_SPACELESS}]"  # one CJK (or other spaceless-script) character
    rf"|[^\W{_SPACELESS}]+"  # a word
    r"|[^\w\s]"  # a punctuation mark
)
# Supplementary private-use planes 15 and 16: 131,068 code points no text of ours holds.
_FIRST = 0xF0000
_LAST = 0x10FFFD


def tokens(text: str) -> list[str]:
    """The text's tokens, words lowercased."""
    return [token.lower() for token in _TOKEN.findall(text)]


@dataclass
class Vocabulary:
    """Each token seen, as one private-use character; tokens past the planes' size share the last one."""

    codes: dict[str, str] = field(default_factory=dict)

    def encode(self, text: str, learn: bool = True) -> str:
        """The text as codes; unless `learn`, a token not seen yet gets a code for this text alone."""
        unseen: dict[str, str] = self.codes if learn else {}
        out = []
        for token in tokens(text):
            code = self.codes.get(token) or unseen.get(token)
            if code is None:
                code = unseen[token] = chr(min(_FIRST + len(self.codes) + len(unseen) * (not learn), _LAST))
            out.append(code)
        return "".join(out)


def similarity(a: str, b: str) -> float:
    """The token-level Indel similarity of two texts, 0-100 (100: the same tokens in the same order)."""
    vocabulary = Vocabulary()
    return float(fuzz.ratio(vocabulary.encode(a), vocabulary.encode(b)))


@dataclass(frozen=True)
class Match:
    source: str
    target: str
    score: float


class FuzzyIndex:
    """One memory's units of one language pair, encoded once, to find a text's best matches fast."""

    def __init__(self, units: Sequence[tuple[str, str]]) -> None:
        self.vocabulary = Vocabulary()
        self.units = list(units)
        self.encoded = [self.vocabulary.encode(source) for source, _ in self.units]

    def best(self, text: str, threshold: float, limit: int) -> list[Match]:
        """Up to `limit` units whose source scores at least `threshold`, best first; an exact match too."""
        if not self.units or limit <= 0:
            return []
        # A token the memory never saw matches nothing: it gets a code of its own, not kept.
        query = self.vocabulary.encode(text, learn=False)
        found = process.extract(
            query, self.encoded, scorer=fuzz.ratio, processor=None, limit=limit, score_cutoff=threshold
        )
        return [Match(*self.units[index], float(score)) for _, score, index in found]

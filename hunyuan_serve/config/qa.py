"""The replica's answer checks (hunyuan_serve/qa): the policy and every threshold, composed into replica."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hunyuan_serve.config.base import Section

QaPolicy = Literal["off", "flag", "retry"]
QA_POLICIES: tuple[QaPolicy, ...] = ("off", "flag", "retry")


class QaSettings(Section):
    """What every answer is checked for before it is sent, and what a failed check does (docs/qa.md)."""

    # flag by default: every check is pure Python on the text (a few tens of microseconds a string, the
    # layer bench's qa row), and telling a caller an answer is suspect costs no engine time; retry
    # doubles the engine's work for each flagged text, which only the operator can decide to spend.
    qa: QaPolicy = Field(
        "flag",
        description="Answer checks: off; flag (answers carry the failed checks: native `qa`, the "
        "X-Hunyuan-QA header); retry (a flagged text is generated once more, the answer failing fewer "
        "checks is kept). A key's qa= and a request's `qa` override it.",
    )
    qa_langid_min_letters: int = Field(
        20,
        ge=1,
        description="wrong_language: letters an answer needs (a Han, kana or Hangul character counts 3) "
        "before its language is judged; shorter answers are not judged.",
    )
    qa_langid_min_words: int = Field(
        3,
        ge=1,
        description="wrong_language: words an answer needs (a Han, kana or Hangul character is one) "
        "before its language is judged; one or two long words are a name or an identifier.",
    )
    qa_langid_confidence: float = Field(
        0.9,
        gt=0,
        le=1,
        description="wrong_language: how sure the language detector must be of another language "
        "(in the target's own script) to flag it.",
    )
    qa_script_min_share: float = Field(
        0.15,
        ge=0,
        le=1,
        description="wrong_language: the least share of an answer's letters in the target language's "
        "script(s); below it the answer is in another script.",
    )
    qa_echo_similarity: float = Field(
        0.8,
        gt=0,
        le=1,
        description="echo: share of the source's words found again in the answer at which a translation "
        "between two languages counts as the source sent back.",
    )
    qa_echo_min_words: int = Field(
        3,
        ge=1,
        description="echo: ordinary words (not names, codes, numbers or acronyms) the source needs "
        "before an echo is judged; a name alone may stay as it is.",
    )
    qa_loop_repeats: int = Field(
        4,
        ge=2,
        description="loop: times in a row one word or phrase may repeat in an answer (beyond the "
        "source's own repeats) before it is a loop.",
    )
    qa_loop_max_ngram: int = Field(
        8, ge=1, le=32, description="loop: the longest phrase, in words (characters in CJK), looked for."
    )
    qa_sentences_min: int = Field(
        4,
        ge=1,
        description="sentences: sentences a source needs before their count in the answer is compared.",
    )
    qa_sentences_min_share: float = Field(
        0.6,
        gt=0,
        le=1,
        description="sentences: the least share of the source's sentences an answer may have "
        "(translators merge some; far fewer means text was dropped).",
    )
    qa_ratio_min_chars: int = Field(
        40,
        ge=1,
        description="length_ratio: characters a source needs before the answer's length is judged.",
    )
    qa_ratio_low: float = Field(
        0.2,
        gt=0,
        le=1,
        description="length_ratio: the shortest answer, as a share of the length expected for the "
        "language pair.",
    )
    qa_ratio_high: float = Field(
        4.0, ge=1, description="length_ratio: the longest answer, in times the length expected for the pair."
    )
    qa_retry_temperature: float = Field(
        0.7,
        gt=0,
        le=2,
        description="retry: the temperature of the second try when the first was greedy (temperature 0), "
        "so that it can differ; otherwise the request's own sampling is drawn again.",
    )
    qa_max_chars: int = Field(
        20_000,
        ge=1,
        description="Characters of a source and its answer the checks read (a longer text: its start), "
        "so their cost stays bounded.",
    )

"""The replica's answer checks (hunyuan_serve/qa): the policy and every threshold, composed into replica."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, model_validator

from hunyuan_serve.config.base import Section

# The validation context in which config/serve.py validates each pool's own config: {"pool": NAME}.
POOL_CONTEXT = "pool"

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
    # Two: sent back as their own answer, 448 of the 454 Django zh_Hans sources of two words or more
    # are flagged (291 with three); what it costs is names kept as they are, in another script only
    # ("Stable Diffusion", "Slack Webhooks"): 7 more of 5,556 human WebUI translations flagged, 5 more
    # of Weblate's 5,138 (`python -m bench qa-planted`).
    qa_echo_min_words_other_script: int = Field(
        2,
        ge=1,
        description="echo: ordinary words the source needs when the target writes in other scripts than "
        "the source and the answer has no letter in them (English sent back for Chinese); at most "
        "qa_echo_min_words.",
    )
    qa_loop_repeats: int = Field(
        4,
        ge=2,
        description="loop: times in a row one word or phrase may repeat in an answer (beyond the "
        "source's own repeats) before it is a loop.",
    )
    # Two, against a source that repeats nothing back to back: no item of the 5,568 human WebUI
    # translations comes twice in a row where its source has no repeat, while a model's loop often
    # starts as one item said twice ("最后, 最终, 封锁, 封锁"), below qa_loop_repeats.
    qa_loop_item_repeats: int = Field(
        2,
        ge=2,
        description="loop: times in a row one list item or sentence (text between commas, 、, semicolons, "
        "sentence ends or line breaks) makes a loop, in an answer whose source repeats nothing back to "
        "back (qa_loop_repeats is for phrases that repeat anywhere).",
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
    # 46 sentences for 50 is 92% of them, far above qa_sentences_min_share, yet four sentences lost.
    # The 5,568 human WebUI translations hold no source over 6 sentences and none that loses 4 and
    # passes the share: how often translators merge 4 sentences of a long paragraph is not measured here.
    qa_sentences_max_lost: int = Field(
        3,
        ge=1,
        description="sentences: the most sentences an answer may lack, however long its source (of at "
        "least qa_sentences_min); more are flagged even above qa_sentences_min_share.",
    )
    qa_ratio_min_chars: int = Field(
        35,
        ge=1,
        description="length_ratio: characters (white space out) a source needs before the answer's "
        "length is judged.",
    )
    qa_ratio_min_words: float = Field(
        5,
        ge=0,
        description="length_ratio: words a source needs before the answer's length is judged (a Han or "
        "kana character is 0.55 of one, a Thai, Lao, Khmer, Burmese or Tibetan letter 0.3).",
    )
    # Measured in words (qa/ratio.py), 0.4 has the checks flag 149 of the 153 Django zh_Hans sources
    # of 40 characters or more answered with the first quarter of their human translation (112 with
    # characters and 0.2), and none of the human translations; on Weblate's own 5,138 zh_Hans pairs,
    # which no threshold was tuned on, 96% of the cut ones (66% before) and no more human ones.
    qa_ratio_low: float = Field(
        0.4,
        gt=0,
        le=1,
        description="length_ratio: the shortest answer, as a share of the length expected for the "
        "language pair.",
    )
    # Eight: no Django or Weblate human translation is longer than four times; the WebUI's that are
    # are translators' notes added to a label, which a model does not write. An answer that runs on
    # is mostly a loop or a stop at max_tokens, which their own checks flag.
    qa_ratio_high: float = Field(
        8.0, ge=1, description="length_ratio: the longest answer, in times the length expected for the pair."
    )
    qa_retry_temperature: float = Field(
        0.7,
        gt=0,
        le=2,
        description="retry: the temperature of the second try when the first was greedy (temperature 0), "
        "so that it can differ; otherwise the request's own sampling is drawn again.",
    )
    qa_retry_reserve_s: float = Field(
        0.5,
        ge=0,
        description="retry: seconds of the request's deadline (request_timeout_s) a retry leaves unused; "
        "one not done by then is dropped and the answers in hand go out, flagged, instead of a 504. Work "
        "still running at the deadline with answers in hand (an event loop too busy to keep to this) has "
        "its retry cut there and this long again to give them.",
    )
    qa_max_chars: int = Field(
        20_000,
        ge=1,
        description="Characters of a source and its answer the checks read (a longer text: its start), "
        "so their cost stays bounded.",
    )
    # The scrape targets `up` writes carry a pool label too; a Prometheus scraping them keeps the
    # target's as `pool` and this one as `exported_pool`, with the same value. A replica scraped any
    # other way (a pod, a replica run by hand) has only this one.
    qa_pool_label: str = Field(
        "default",
        min_length=1,
        description="The `pool` label of hunyuan_qa_flags_total: the pool this replica serves. Each "
        "pool's config sets it to the pool's name (pools[].name), for `up` and the Kubernetes "
        "manifests alike; `default` without a pools section. Set it for a replica run on its own.",
    )

    @model_validator(mode="before")
    @classmethod
    def _pool_label_from_its_pool(cls, data: Any, info: ValidationInfo) -> Any:
        """A pool's config (validated with the pool's name as context) labels its counter with that
        name, whatever its replica overrides say, so no two pools count under one label."""
        pool = (info.context or {}).get(POOL_CONTEXT)
        if pool and isinstance(data, dict):
            return {**data, "qa_pool_label": pool}
        return data

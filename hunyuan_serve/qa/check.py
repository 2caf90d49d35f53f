"""Every check on one answer, in the order of flags.CHECKS: the list of those it fails."""

from __future__ import annotations

from dataclasses import dataclass

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.qa import completeness, tokens
from hunyuan_serve.qa.echo import echo
from hunyuan_serve.qa.flags import EMPTY, TRUNCATED, Flag
from hunyuan_serve.qa.langid import wrong_language
from hunyuan_serve.qa.loops import loop
from hunyuan_serve.qa.ratio import length_ratio


@dataclass(frozen=True)
class Answer:
    """One translation to check: its source, the answer, the language pair and why generation ended."""

    source: str
    output: str
    source_lang: str
    target_lang: str
    finish_reason: str | None = "stop"


def check(answer: Answer, cfg: QaSettings) -> list[Flag]:
    """The failed checks of one answer (empty: it passed them all); each reads at most qa_max_chars.

    An empty answer to a text is that flag alone: the other checks would only restate it."""
    source, output = answer.source[: cfg.qa_max_chars], answer.output[: cfg.qa_max_chars]
    if not output.strip() and answer.source.strip():
        return [Flag(EMPTY, "the answer is empty (or only white space) for a text that is not")]
    pair = (answer.source_lang, answer.target_lang)
    prose_source, prose_output = tokens.prose(source), tokens.prose(output)
    found = [
        wrong_language(output, answer.target_lang, cfg, prose_output),
        echo(prose_source, prose_output, pair, cfg),
        loop(prose_source, prose_output, cfg),
    ]
    if answer.finish_reason == "length":
        found.append(Flag(TRUNCATED, "the answer stopped at max_tokens, mid-text"))
    flags = [flag for flag in found if flag is not None]
    flags += completeness.structure(source, output, prose_source, prose_output, cfg)
    flags += completeness.kept(source, output)
    ratio = length_ratio(source, output, pair, cfg)
    return flags + ([ratio] if ratio is not None else [])


def check_generation(output: str, finish_reason: str | None, cfg: QaSettings) -> list[Flag]:
    """What can be checked of an answer to a prompt as a client wrote it (no known source or target):
    a loop, and a stop at max_tokens."""
    found = [loop(None, tokens.prose(output[: cfg.qa_max_chars]), cfg)]
    if finish_reason == "length":
        found.append(Flag(TRUNCATED, "the answer stopped at max_tokens, mid-text"))
    return [flag for flag in found if flag is not None]

"""Each tiny checkpoint loads in vLLM (one process, one after another) and generates from its prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.families.detect import family_from_config, read_model_config
from hunyuan_serve.languages import find_language
from tests.support.ahead import OfflineRuns

# (tiny kind, request fields, the chat text the published layout gives: tiny_model.py cites each source)
CASES: dict[str, tuple[dict[str, Any], str]] = {
    "hunyuan-mt": (
        {},
        "<|startoftext|>把下面的文本翻译成中文，不要额外解释。\n\nThe GPU is fast.<|extra_0|>",
    ),
    "hy-mt1.5": (
        {"glossary": {"GPU": "显卡"}},
        "<｜hy_begin▁of▁sentence｜><｜hy_User｜>参考下面的翻译：\nGPU 翻译成 显卡\n\n将以下文本翻译为中文，"
        "注意只需要输出翻译后的结果，不要额外解释：\nThe GPU is fast.<｜hy_Assistant｜>",
    ),
    "hy-mt2": (
        {"style": "口语"},
        "<｜hy_begin▁of▁sentence｜><｜hy_User｜>请将以下文本翻译为中文。\n注意翻译的风格要严格符合【口语】\n\n"
        "The GPU is fast.<｜hy_Assistant｜>",
    ),
    "hy-mt2-moe": (
        {"context": "A hardware review."},
        "<｜hy_begin▁of▁sentence｜><｜hy_User｜>【背景信息】\nA hardware review.\n\n"
        "请结合背景信息将以下文本翻译为中文。\n\n【待翻译文本】\nThe GPU is fast."
        "<｜hy_Assistant｜><think></think>",
    ),
}


def family_jobs(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """One offline-engine job per tiny checkpoint: its family's prompt of the case's fields."""
    dirs: dict[str, Path] = request.getfixturevalue("tiny_family_dirs")
    jobs = []
    for kind, (fields, _) in CASES.items():
        family = family_from_config("auto", read_model_config(str(dirs[kind])))
        prompt = build_prompt(family, find_language("en"), find_language("zh"), "The GPU is fast.", **fields)
        jobs.append({"model": str(dirs[kind]), "messages": list(prompt.messages)})
    return jobs


# Started at the session's start (tests/support/ahead.py): every checkpoint through vLLM, one process.
pytestmark = [pytest.mark.engine, pytest.mark.offline_ahead("families", family_jobs)]


@pytest.fixture(scope="module")
def engine_results(request: pytest.FixtureRequest, offline_runs: OfflineRuns) -> dict[str, dict[str, Any]]:
    results = offline_runs.results("families", family_jobs(request))
    return dict(zip(CASES, results, strict=True))


@pytest.mark.parametrize("kind", list(CASES))
def test_tiny_checkpoint_serves_its_family_prompt(
    kind: str, engine_results: dict[str, dict[str, Any]]
) -> None:
    result = engine_results[kind]
    assert result["chat"] == CASES[kind][1]
    assert result["prompt_token_ids"] == result["sent_token_ids"]
    assert len(result["output_token_ids"]) == 4

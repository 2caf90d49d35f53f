"""Each tiny checkpoint loads in vLLM (one process, one after another) and generates from its prompt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.families.detect import family_from_config, read_model_config
from hunyuan_serve.languages import find_language

pytestmark = pytest.mark.engine

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


@pytest.fixture(scope="module")
def engine_results(tiny_family_dirs: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Every checkpoint through vLLM in one child process (see tests/support/offline_engine.py for why)."""
    jobs = []
    for kind, (fields, _) in CASES.items():
        family = family_from_config("auto", read_model_config(str(tiny_family_dirs[kind])))
        prompt = build_prompt(family, find_language("en"), find_language("zh"), "The GPU is fast.", **fields)
        jobs.append({"model": str(tiny_family_dirs[kind]), "messages": list(prompt.messages)})
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.offline_engine"],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    return dict(zip(CASES, results, strict=True))


@pytest.mark.parametrize("kind", list(CASES))
def test_tiny_checkpoint_serves_its_family_prompt(
    kind: str, engine_results: dict[str, dict[str, Any]]
) -> None:
    result = engine_results[kind]
    assert result["chat"] == CASES[kind][1]
    assert result["prompt_token_ids"] == result["sent_token_ids"]
    assert len(result["output_token_ids"]) == 4

"""Each tiny checkpoint loads in vLLM (one process, one after another) and generates from its prompt."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
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


@pytest.fixture
def llm_for(tiny_family_dirs: dict[str, Path]) -> Iterator[Any]:
    """Builds vLLM's offline engine in this process (no engine-core subprocess) and frees it afterwards."""
    engines: list[Any] = []

    def build(kind: str) -> Any:
        from vllm import LLM

        engines.append(
            LLM(
                model=str(tiny_family_dirs[kind]),
                dtype="float32",
                enforce_eager=True,
                max_model_len=512,
                kv_cache_memory_bytes=64 * 1024 * 1024,
                distributed_executor_backend="uni",
                seed=0,
            )
        )
        return engines[-1]

    with pytest.MonkeyPatch.context() as mp:
        for key, value in {
            "VLLM_TARGET_DEVICE": "cpu",
            "VLLM_HOST_IP": "127.0.0.1",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        }.items():
            mp.setenv(key, os.environ.get(key, value))
        yield build
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        engines.clear()
        gc.collect()
        cleanup_dist_env_and_memory()


@pytest.mark.parametrize("kind", list(CASES))
def test_tiny_checkpoint_serves_its_family_prompt(
    kind: str, tiny_family_dirs: dict[str, Path], llm_for: Any
) -> None:
    from vllm import SamplingParams

    fields, expected_chat = CASES[kind]
    family = family_from_config("auto", read_model_config(str(tiny_family_dirs[kind])))
    prompt = build_prompt(family, find_language("en"), find_language("zh"), "The GPU is fast.", **fields)
    llm = llm_for(kind)
    tokenizer = llm.get_tokenizer()
    chat = tokenizer.apply_chat_template(list(prompt.messages), tokenize=False, add_generation_prompt=True)
    assert chat == expected_chat
    ids = tokenizer(chat, add_special_tokens=False)["input_ids"]
    out = llm.generate(
        [{"prompt_token_ids": ids}], SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    )
    assert list(out[0].prompt_token_ids) == ids
    assert len(out[0].outputs[0].token_ids) == 4

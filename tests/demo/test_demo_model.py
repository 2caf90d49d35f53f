"""The embedded demo model end to end: converted Gemma 3 270M loads in vLLM and translates UI strings."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hunyuan_serve.demo_model import BOS_ID, GEMMA_NOTICE, ensure_demo_model, is_complete
from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.families.detect import family_from_config, read_model_config
from hunyuan_serve.languages import find_language

pytestmark = pytest.mark.demo

# WebUI strings with their human zh_CN translation (bench/data), which greedy decoding gets exactly.
EXACT = {"Delete": "删除", "Cancel": "取消"}


@pytest.fixture(scope="module")
def demo_dir() -> Path:
    """The cached conversion (converted here, about 2-3 minutes, when the cache is empty)."""
    return ensure_demo_model()


@pytest.fixture(scope="module")
def llm(demo_dir: Path) -> Iterator[Any]:
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {
            "VLLM_TARGET_DEVICE": "cpu",
            "VLLM_HOST_IP": "127.0.0.1",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        }.items():
            mp.setenv(key, os.environ.get(key, value))
        from vllm import LLM

        engine = LLM(
            model=str(demo_dir),
            dtype="float32",
            enforce_eager=True,
            max_model_len=512,
            kv_cache_memory_bytes=256 * 1024 * 1024,
            distributed_executor_backend="uni",
            seed=0,
        )
        yield engine
        del engine


def test_checkpoint_is_complete_with_notice(demo_dir: Path) -> None:
    assert is_complete(demo_dir)
    assert GEMMA_NOTICE in (demo_dir / "NOTICE").read_text(encoding="utf-8")
    config = read_model_config(str(demo_dir))
    assert config["architectures"] == ["Gemma3ForCausalLM"]
    assert "quantization_config" not in config
    assert family_from_config("auto", config) == "few-shot"


def test_tokenizer_starts_with_bos(demo_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(demo_dir))
    assert tok("Hi").input_ids[0] == BOS_ID
    assert tok("Hi").input_ids.count(BOS_ID) == 1


def test_second_call_reuses_the_cache(demo_dir: Path) -> None:
    before = (demo_dir / "model.safetensors").stat().st_mtime_ns
    assert ensure_demo_model(demo_dir.parent) == demo_dir
    assert (demo_dir / "model.safetensors").stat().st_mtime_ns == before


def test_vllm_greedy_few_shot_translates_webui_strings(llm: Any) -> None:
    from vllm import SamplingParams

    en, zh = find_language("en"), find_language("zh")
    texts = [*EXACT, "Save images", "Sampling method"]
    prompts = [build_prompt("few_shot", en, zh, text) for text in texts]
    params = SamplingParams(temperature=0.0, max_tokens=16, stop=list(prompts[0].stop))
    outputs = llm.generate([p.text for p in prompts], params)
    got = {text: out.outputs[0].text.strip() for text, out in zip(texts, outputs, strict=True)}
    for text, expected in EXACT.items():
        assert got[text] == expected, got
    assert "采样" in got["Sampling method"], got
    # A 270M base model gets about half exactly right, but every answer is one line of Chinese.
    for answer in got.values():
        assert answer and "\n" not in answer, got
        assert any("\u4e00" <= ch <= "\u9fff" for ch in answer), got


def test_cli_prints_the_cached_path(demo_dir: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hunyuan_serve", "demo-model", "--cache-dir", str(demo_dir.parent)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(demo_dir)
    assert "using cached checkpoint" in proc.stderr

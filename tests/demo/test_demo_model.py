"""The embedded demo model end to end: converted Gemma 3 270M loads in vLLM and translates UI strings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hunyuan_serve.demo_model import BOS_ID, GEMMA_NOTICE, ensure_demo_model, is_complete
from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.families.detect import family_from_config, read_model_config
from hunyuan_serve.languages import find_language
from tests.support.ahead import OfflineRuns

# WebUI strings with their human zh_CN translation (bench/data), which greedy decoding gets exactly.
EXACT = {"Delete": "删除", "Cancel": "取消"}
TEXTS = [*EXACT, "Save images", "Sampling method"]
DEMO_KV_CACHE_BYTES = 256 * 1024 * 1024


def greedy_jobs(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """The demo model's few-shot prompts for TEXTS, 16 greedy tokens each, to its stop strings."""
    en, zh = find_language("en"), find_language("zh")
    prompts = [build_prompt("few_shot", en, zh, text) for text in TEXTS]
    return [
        {
            "model": "demo",
            "prompts": [p.text for p in prompts],
            "max_tokens": 16,
            "stop": list(prompts[0].stop),
            "kv_cache_bytes": DEMO_KV_CACHE_BYTES,
        }
    ]


# The engine run starts at the session's start (tests/support/ahead.py), after the conversion ahead.
pytestmark = [pytest.mark.demo, pytest.mark.offline_ahead("demo-greedy", greedy_jobs)]


@pytest.fixture(scope="module")
def demo_dir() -> Path:
    """The cached conversion (converted here, about 2-3 minutes, when the cache is empty)."""
    return ensure_demo_model()


@pytest.fixture(scope="module")
def greedy_answers(request: pytest.FixtureRequest, offline_runs: OfflineRuns) -> dict[str, str]:
    """vLLM's greedy answer to each of TEXTS, from the offline engine on the demo checkpoint."""
    (result,) = offline_runs.results("demo-greedy", greedy_jobs(request))
    return dict(zip(TEXTS, result["texts"], strict=True))


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


def test_vllm_greedy_few_shot_translates_webui_strings(greedy_answers: dict[str, str]) -> None:
    got = {text: answer.strip() for text, answer in greedy_answers.items()}
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

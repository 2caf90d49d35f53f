"""The engine stand-in (engine.stand_in): real template and tokenizer, no model, and it always says so."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from transformers import AutoTokenizer

from hunyuan_serve.config import EngineConfig
from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.languages import find_language
from hunyuan_serve.replica.encoding import encode_prompt
from hunyuan_serve.replica.engine.interface import Sampling
from hunyuan_serve.replica.standin import STAND_IN, StandInEngine, checkpoint_max_len
from tests.support.stacks import cli, free_port, http_ok, started

SAMPLING = Sampling(temperature=0.7, top_p=0.6, top_k=20, repetition_penalty=1.05, max_tokens=64)


async def test_counts_are_the_real_template_and_tokenizer(tiny_model_dir: Path) -> None:
    engine = StandInEngine(EngineConfig(model=str(tiny_model_dir)), str(tiny_model_dir))
    await engine.start()
    prompt = build_prompt("hunyuan-mt", find_language("en"), find_language("zh"), "Save the settings now")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    ids = encode_prompt(tokenizer, prompt)
    generation = await engine.generate(prompt, SAMPLING, "r1")
    assert engine.count_prompt_tokens(prompt) == generation.prompt_tokens == len(ids) > 10
    assert generation.output_tokens == EngineConfig().stand_in_output_tokens
    assert generation.text == tokenizer.decode(ids[-16:], skip_special_tokens=True).strip()
    assert "settings now" in generation.text
    short = await engine.generate(prompt, Sampling(0.7, 0.6, 20, 1.05, max_tokens=3), "r2")
    assert short.output_tokens == 3 and short.finish_reason == "length"
    deltas = [delta async for delta in engine.stream(prompt, SAMPLING, "r3")]
    assert "".join(d.text for d in deltas) == generation.text and deltas[-1].final is not None
    assert engine.max_model_len == checkpoint_max_len(str(tiny_model_dir)) and engine.is_alive()
    engine.shutdown()
    assert not engine.is_alive()


def test_replica_command_serves_and_names_the_stand_in(tiny_model_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    argv = cli("replica", "--model", str(tiny_model_dir), "--stand-in", "true", "--port", str(port))
    argv += ["--max-model-len", "512"]
    log = tmp_path / "replica.log"
    url = f"http://127.0.0.1:{port}"
    with started(argv, log=log, ready=http_ok(f"{url}/health"), timeout_s=120):
        health = httpx.get(f"{url}/health", trust_env=False).json()
        assert health["engine"] == STAND_IN and health["status"] == "ready"
        body = {"texts": ["Open the file", "Close the window"], "source_lang": "en", "target_lang": "zh"}
        answer = httpx.post(f"{url}/translate", json=body, trust_env=False).json()
        assert answer["results"][0].endswith("Open the file") and answer["cached"] == [False, False]
        again = httpx.post(f"{url}/translate", json=body, trust_env=False).json()
        assert again["cached"] == [True, True]  # the cache stays in front of the stand-in
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert any(line.get("event") == "engine_stand_in" for line in lines)
    starting = [line for line in lines if line.get("event") == "replica_starting"]
    assert [line["engine"] for line in starting] == ["StandInEngine"]

"""The tiny checkpoint has Hunyuan-MT's architecture, control tokens and chat template."""

from __future__ import annotations

import json
from pathlib import Path

from hunyuan_serve.tiny_model import EOS_TOKENS


def test_config_is_hunyuan_dense(tiny_model_dir: Path) -> None:
    config = json.loads((tiny_model_dir / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["HunYuanDenseV1ForCausalLM"]
    assert config["model_type"] == "hunyuan_v1_dense"
    assert config["rope_parameters"]["alpha"] == 1000.0


def test_chat_template_matches_hunyuan_mt(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    text = tok.apply_chat_template([{"role": "user", "content": "你好"}], tokenize=False)
    assert text == "<|startoftext|>你好<|extra_0|>"


def test_byte_level_tokenizer_round_trips_any_script(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    for text in ["Hello world", "今天天氣很好", "བཀྲ་ཤིས་", "ئەسسالامۇ", "😀 emoji ∑"]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
        assert tok.unk_token_id not in ids


def test_generation_config_lists_hunyuan_stop_tokens(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    gen = json.loads((tiny_model_dir / "generation_config.json").read_text(encoding="utf-8"))
    assert gen["eos_token_id"] == [tok.convert_tokens_to_ids(t) for t in EOS_TOKENS]
    assert len(tok) <= json.loads((tiny_model_dir / "config.json").read_text())["vocab_size"]


def test_tiny_model_command_writes_a_checkpoint(tmp_path: Path) -> None:
    from hunyuan_serve.cli import main

    assert main(["tiny-model", str(tmp_path / "tiny"), "--seed", "1"]) == 0
    assert (tmp_path / "tiny" / "model.safetensors").is_file()
    assert (tmp_path / "tiny" / "chat_template.jinja").is_file()

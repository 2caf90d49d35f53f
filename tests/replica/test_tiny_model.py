"""The tiny checkpoints have each generation's architecture, control tokens, chat template and sampling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hunyuan_serve.families import sampling_defaults
from hunyuan_serve.tiny_model import EOS_TOKENS, SPECS

USER = [{"role": "user", "content": "你好"}]
WITH_SYSTEM = [
    {"role": "system", "content": "S"},
    {"role": "user", "content": "U"},
    {"role": "assistant", "content": "A"},
    {"role": "user", "content": "V"},
]
# The rendered text each generation's published layout gives (sources in hunyuan_serve/tiny_model.py):
# Hunyuan-MT-7B's tokenizer_config.json template; Tencent-Hunyuan/Hy-MT2 train/llama_factory_support/
# hy_dense_template.py ("Dense 1.8B") and hy_v3_template.py (HYV3), with add_generation_prompt=True as the
# replica renders.
RENDERED = {
    "hunyuan-mt": (
        "<|startoftext|>你好<|extra_0|>",
        "<|startoftext|>S<|extra_4|>U<|extra_0|>A<|eos|><|startoftext|>V<|extra_0|>",
    ),
    "hy-mt1.5": (
        "<｜hy_begin▁of▁sentence｜><｜hy_User｜>你好<｜hy_Assistant｜>",
        "<｜hy_begin▁of▁sentence｜>S<｜hy_place▁holder▁no▁3｜><｜hy_User｜>U<｜hy_Assistant｜>A"
        "<｜hy_place▁holder▁no▁2｜><｜hy_User｜>V<｜hy_Assistant｜>",
    ),
    "hy-mt2-moe": (
        "<｜hy_begin▁of▁sentence｜><｜hy_User｜>你好<｜hy_Assistant｜><think></think>",
        "<｜hy_begin▁of▁sentence｜>S<｜hy_User｜>U<｜hy_Assistant｜><think></think>A<｜hy_eos｜>"
        "<｜hy_User｜>V<｜hy_Assistant｜><think></think>",
    ),
}
RENDERED["hy-mt2"] = RENDERED["hy-mt1.5"]  # Hy-MT2-1.8B keeps HY-MT1.5-1.8B's tokenizer layout
RENDERED["chimera"] = RENDERED["hunyuan-mt"]  # Hunyuan-MT-Chimera-7B: Hunyuan-MT-7B's template
ARCHITECTURES = {
    "hunyuan-mt": ("HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense"),
    "chimera": ("HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense"),
    "hy-mt1.5": ("HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense"),
    "hy-mt2": ("HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense"),
    "hy-mt2-moe": ("HYV3ForCausalLM", "hy_v3"),
}


def _json(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_config_is_hunyuan_dense(tiny_model_dir: Path) -> None:
    config = json.loads((tiny_model_dir / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["HunYuanDenseV1ForCausalLM"]
    assert config["model_type"] == "hunyuan_v1_dense"
    assert config["rope_parameters"]["alpha"] == 1000.0


@pytest.mark.parametrize("kind", list(SPECS))
def test_each_generation_has_its_architecture(kind: str, tiny_family_dirs: dict[str, Path]) -> None:
    config = _json(tiny_family_dirs[kind] / "config.json")
    assert (config["architectures"], config["model_type"]) == (
        [ARCHITECTURES[kind][0]],
        ARCHITECTURES[kind][1],
    )
    if kind == "hy-mt2-moe":
        assert config["num_experts"] == 4 and config["mlp_layer_types"] == ["dense", "sparse"]
        # The released config's keys that vLLM's hy_v3 needs (see RELEASED_HYV3_KEYS).
        assert (
            config["first_k_dense_replace"] == 1
            and config["expert_hidden_dim"] == config["moe_intermediate_size"]
        )


@pytest.mark.parametrize("kind", list(SPECS))
def test_chat_template_renders_the_published_layout(kind: str, tiny_family_dirs: dict[str, Path]) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_family_dirs[kind]))
    for messages, expected in zip((USER, WITH_SYSTEM), RENDERED[kind], strict=True):
        assert tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == expected


@pytest.mark.parametrize("kind", list(SPECS))
def test_stop_tokens_and_sampling_come_from_the_tables(kind: str, tiny_family_dirs: dict[str, Path]) -> None:
    from transformers import AutoTokenizer

    path = tiny_family_dirs[kind]
    tok = AutoTokenizer.from_pretrained(str(path))
    gen = _json(path / "generation_config.json")
    assert gen["eos_token_id"] == [tok.convert_tokens_to_ids(t) for t in SPECS[kind].stop_tokens]
    assert tok.eos_token == SPECS[kind].eos and tok.bos_token == SPECS[kind].bos
    family = "hy-mt2" if kind == "hy-mt2-moe" else kind
    for field, value in sampling_defaults(family, SPECS[kind].sampling_model).as_dict().items():
        assert gen[field] == value, field
    vocab_size = _json(path / "config.json")["vocab_size"]
    assert isinstance(vocab_size, int) and len(tok) <= vocab_size


def test_the_moe_samples_like_the_30b_readme(tiny_family_dirs: dict[str, Path]) -> None:
    # Tencent-Hunyuan/Hy-MT2 README.md: 30B-A3B 0.7 / 1.0 / -1 / 1.0, the dense ones 0.7 / 0.6 / 20 / 1.05.
    moe = _json(tiny_family_dirs["hy-mt2-moe"] / "generation_config.json")
    dense = _json(tiny_family_dirs["hy-mt2"] / "generation_config.json")
    assert [moe[k] for k in ("temperature", "top_p", "top_k", "repetition_penalty")] == [0.7, 1.0, -1, 1.0]
    assert [dense[k] for k in ("temperature", "top_p", "top_k", "repetition_penalty")] == [0.7, 0.6, 20, 1.05]


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


def test_tiny_model_command_writes_a_checkpoint(tmp_path: Path) -> None:
    from hunyuan_serve.cli import main

    assert main(["tiny-model", str(tmp_path / "tiny"), "--seed", "1"]) == 0
    assert (tmp_path / "tiny" / "model.safetensors").is_file()
    assert (tmp_path / "tiny" / "chat_template.jinja").is_file()
    assert main(["tiny-model", str(tmp_path / "moe"), "--family", "hy-mt2", "--moe"]) == 0
    assert _json(tmp_path / "moe" / "config.json")["architectures"] == ["HYV3ForCausalLM"]
    assert main(["tiny-model", str(tmp_path / "bad"), "--family", "hy-mt1.5", "--moe"]) == 2


def test_tiny_model_takes_the_generation_from_the_directory_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/operations.md: name DIR like the generation; without --family the name decides, as it decides
    the prompt family `up` places the checkpoint in."""
    from hunyuan_serve.cli import main
    from hunyuan_serve.tiny_model import chosen_family

    out = tmp_path / "HY-MT1.5-1.8B-tiny"
    assert main(["tiny-model", str(out)]) == 0
    said = capsys.readouterr().out
    assert "generation hy-mt1.5, as the directory name says (--family picks another)" in said
    assert "shaped like HY-MT1.5-1.8B" in (out / "README.md").read_text(encoding="utf-8")
    assert "<｜hy_begin▁of▁sentence｜>" in (out / "tokenizer_config.json").read_text(encoding="utf-8")
    assert chosen_family("hunyuan-mt", str(out)) == ("hunyuan-mt", "generation hunyuan-mt (--family)")
    assert chosen_family(None, str(tmp_path / "Hy-MT2-7B"))[0] == "hy-mt2"
    family, said = chosen_family(None, str(tmp_path / "tiny"))
    assert family == "hunyuan-mt" and "the directory name names none" in said

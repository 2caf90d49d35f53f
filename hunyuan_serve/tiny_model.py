"""A tiny random-weight checkpoint of Hunyuan-MT's architecture, built locally in seconds for tests and CI."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# Hunyuan-MT-7B's own chat template (tokenizer_config.json of tencent/Hunyuan-MT-7B): no generation
# prompt; the answer starts right after <|extra_0|> and ends with <|eos|>.
HUNYUAN_CHAT_TEMPLATE = (
    "{% set ns = namespace(has_head=true) %}{% set loop_messages = messages %}"
    "{% for message in loop_messages %}{% set content = message['content'] %}"
    "{% if loop.index0 == 0 %}{% if content == '' %}{% set ns.has_head = false %}"
    "{% elif message['role'] == 'system' %}{% set content = '<|startoftext|>' + content + '<|extra_4|>' %}"
    "{% endif %}{% endif %}"
    "{% if message['role'] == 'user' %}{% if loop.index0 == 1 and ns.has_head %}"
    "{% set content = content + '<|extra_0|>' %}"
    "{% else %}{% set content = '<|startoftext|>' + content + '<|extra_0|>' %}{% endif %}"
    "{% elif message['role'] == 'assistant' %}{% set content = content + '<|eos|>' %}{% endif %}"
    "{{ content }}{% endfor %}"
)

# Hunyuan-MT's control tokens; ids follow the order here (the real model has them near 127957).
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|startoftext|>",
    "<|eos|>",
    "<|pad|>",
    *(f"<|extra_{i}|>" for i in range(6)),
)
EOS_TOKENS = ("<|eos|>", "<|extra_5|>", "<|endoftext|>")

VOCAB_SIZE = 1024

# Byte-level BPE covers every script; this text only decides which merges exist.
_CORPUS = """\
Translate the following segment into Chinese, without additional explanation.
把下面的文本翻译成英语，不要额外解释。
The quick brown fox jumps over the lazy dog. Open file. Delete. Refresh. Enable. Show preview.
打开文件 删除 刷新 启用 显示预览 今天天气很好。我们一起去公园散步吧。
Le renard brun rapide saute par-dessus le chien paresseux. Bonjour le monde.
Der schnelle braune Fuchs springt über den faulen Hund. Guten Morgen.
El rápido zorro marrón salta sobre el perro perezoso. Buenos días.
素早い茶色の狐が怠け者の犬を飛び越える。こんにちは、世界。
빠른 갈색 여우가 게으른 개를 뛰어넘는다. 안녕하세요 세계.
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, мир.
الثعلب البني السريع يقفز فوق الكلب الكسول. مرحبا بالعالم.
สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ
Con cáo nâu nhanh nhẹn nhảy qua con chó lười.
तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।
བཀྲ་ཤིས་བདེ་ལེགས། ئەسسالامۇ ئەلەيكۇم Сайн байна уу Сәлеметсіз бе
今日好好天氣，我哋一齊去行街啦。繁體中文的測試句子。
"""


def _train_tokenizer() -> object:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS.splitlines() * 4, trainer=trainer)
    return tok


def build_tiny_model(path: str | Path, seed: int = 0) -> Path:
    """Write a HunYuanDenseV1ForCausalLM checkpoint with random weights, tokenizer and chat template."""
    import torch
    from transformers import (
        GenerationConfig,
        HunYuanDenseV1Config,
        HunYuanDenseV1ForCausalLM,
        PreTrainedTokenizerFast,
    )

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=_train_tokenizer(),
        bos_token="<|startoftext|>",
        eos_token="<|eos|>",
        pad_token="<|pad|>",
        additional_special_tokens=list(SPECIAL_TOKENS[4:]),
        model_max_length=2048,
    )
    tokenizer.chat_template = HUNYUAN_CHAT_TEMPLATE
    vocab = tokenizer.get_vocab()
    ids: dict[str, int] = {token: vocab[token] for token in SPECIAL_TOKENS}
    eos_ids = [ids[token] for token in EOS_TOKENS]
    config = HunYuanDenseV1Config(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "dynamic", "alpha": 1000.0, "rope_theta": 10000.0, "factor": 1.0},
        bos_token_id=ids["<|startoftext|>"],
        eos_token_id=ids["<|eos|>"],
        pad_token_id=ids["<|pad|>"],
        eod_token_id=ids["<|endoftext|>"],
        architectures=["HunYuanDenseV1ForCausalLM"],
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = HunYuanDenseV1ForCausalLM(config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    generation = GenerationConfig(
        bos_token_id=ids["<|startoftext|>"],
        eos_token_id=eos_ids,
        pad_token_id=ids["<|pad|>"],
        do_sample=True,
        temperature=0.7,
        top_p=0.6,
        top_k=20,
        repetition_penalty=1.05,
    )
    generation.save_pretrained(out)
    (out / "README.md").write_text(
        "Tiny random-weight HunYuanDenseV1 checkpoint (`hunyuan-serve tiny-model`); output is noise.\n",
        encoding="utf-8",
    )
    return out


def _run(args: argparse.Namespace) -> int:
    out = build_tiny_model(args.dir, seed=args.seed)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    print(f"tiny {config['model_type']} checkpoint written to {out}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "tiny-model",
        help="Build a tiny random-weight Hunyuan-MT-architecture checkpoint (tests, CI).",
        description="Build a tiny random-weight HunYuanDenseV1ForCausalLM checkpoint in DIR, no downloads.",
    )
    parser.add_argument("dir", metavar="DIR", help="Output directory.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the random weights.")
    parser.set_defaults(func=_run)

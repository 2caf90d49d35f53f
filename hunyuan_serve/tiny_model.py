"""Tiny random-weight checkpoints of each Hunyuan translation generation's architecture, built in seconds."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hunyuan_serve.families import CHIMERA, FAMILIES, FEW_SHOT, HUNYUAN_MT, HY_MT2, HY_MT15, sampling_defaults
from hunyuan_serve.families.detect import family_from_name

# Hunyuan-MT-7B's own chat template (tokenizer_config.json of tencent/Hunyuan-MT-7B): no generation
# prompt; the answer starts right after <|extra_0|> and ends with <|eos|>. HY-MT1.5-7B and Hy-MT2-7B
# keep this layout (Tencent-Hunyuan/Hy-MT2, train/llama_factory_support/hy_dense_template.py, "Dense 7B
# chat template ... from dense_7b_0509/.../chat_template.jinja").
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
# The 1.8B models (HY-MT1.5-1.8B, Hy-MT2-1.8B) use the newer Hunyuan tokenizer. Token texts and roles:
# HY-MT1.5-1.8B's tokenizer_config.json and config.json (bos 120000 <｜hy_begin▁of▁sentence｜>, eos
# 120020 <｜hy_place▁holder▁no▁2｜>, pad <｜hy_▁pad▁｜>; read from a public mirror of the hub files, the
# chat_template.jinja itself was not among them). Layout: Tencent-Hunyuan/Hy-MT2,
# train/llama_factory_support/hy_dense_template.py ("Dense 1.8B chat template", said there to match the
# official jinja exactly): BOS, system + <｜hy_place▁holder▁no▁3｜>, <｜hy_User｜>{user},
# <｜hy_Assistant｜>{answer}<eos>. This is a compact Jinja of that layout (system, user, assistant turns).
HY_DENSE_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ m['content'] }}<｜hy_place▁holder▁no▁3｜>"
    "{% elif m['role'] == 'user' %}<｜hy_User｜>{{ m['content'] }}"
    "{% elif m['role'] == 'assistant' %}<｜hy_Assistant｜>{{ m['content'] }}{{ eos_token }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<｜hy_Assistant｜>{% endif %}"
)
# Hy-MT2-30B-A3B (HYV3ForCausalLM). Layout: Tencent-Hunyuan/Hy-MT2,
# train/llama_factory_support/hy_v3_template.py ("from chat_template.jinja & tokenizer_config.json"): BOS,
# the system text right after it, <｜hy_User｜>{user}, <｜hy_Assistant｜>{answer}<｜hy_eos｜>, <think></think>
# tags. The generation prompt <｜hy_Assistant｜><think></think> is the empty ("no_think") reasoning block
# of the HYV3 chat template as published with tencent/Hy3-preview; Hy-MT2's own jinja was not found.
HYV3_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ m['content'] }}{% endif %}{% endfor %}"
    "{% for m in messages %}{% if m['role'] == 'user' %}<｜hy_User｜>{{ m['content'] }}"
    "{% elif m['role'] == 'assistant' %}<｜hy_Assistant｜><think></think>{{ m['content'] }}{{ eos_token }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<｜hy_Assistant｜><think></think>{% endif %}"
)


@dataclass(frozen=True)
class TinySpec:
    """One generation's tokenizer and architecture: control tokens, their roles, template, stop tokens."""

    kind: str
    architecture: str
    special_tokens: tuple[str, ...]
    bos: str
    eos: str
    pad: str
    stop_tokens: tuple[str, ...]
    chat_template: str
    sampling_model: str  # the model name sampling_defaults is asked about


# Hunyuan-MT's control tokens; ids follow the order here (the real model has them near 127957).
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|startoftext|>",
    "<|eos|>",
    "<|pad|>",
    *(f"<|extra_{i}|>" for i in range(6)),
)
EOS_TOKENS = ("<|eos|>", "<|extra_5|>", "<|endoftext|>")
HY_SPECIAL_TOKENS = (
    "<｜hy_begin▁of▁sentence｜>",
    "<｜hy_end▁of▁sentence｜>",
    "<｜hy_▁pad▁｜>",
    "<｜hy_User｜>",
    "<｜hy_Assistant｜>",
    "<｜hy_place▁holder▁no▁2｜>",
    "<｜hy_place▁holder▁no▁3｜>",
    "<｜hy_place▁holder▁no▁8｜>",
)
HYV3_SPECIAL_TOKENS = (
    "<｜hy_begin▁of▁sentence｜>",
    "<｜hy_▁pad▁｜>",
    "<｜hy_User｜>",
    "<｜hy_Assistant｜>",
    "<｜hy_eos｜>",
    "<think>",
    "</think>",
)
DENSE = "HunYuanDenseV1ForCausalLM"
HYV3 = "HYV3ForCausalLM"
_HUNYUAN_7B = TinySpec(
    HUNYUAN_MT,
    DENSE,
    SPECIAL_TOKENS,
    "<|startoftext|>",
    "<|eos|>",
    "<|pad|>",
    EOS_TOKENS,
    HUNYUAN_CHAT_TEMPLATE,
    "Hunyuan-MT-7B",
)
_HY_MT15 = TinySpec(
    HY_MT15,
    DENSE,
    HY_SPECIAL_TOKENS,
    HY_SPECIAL_TOKENS[0],
    HY_SPECIAL_TOKENS[5],
    HY_SPECIAL_TOKENS[2],
    (HY_SPECIAL_TOKENS[5],),
    HY_DENSE_CHAT_TEMPLATE,
    "HY-MT1.5-1.8B",
)
MOE = "hy-mt2-moe"
SPECS: dict[str, TinySpec] = {
    HUNYUAN_MT: _HUNYUAN_7B,
    # Hunyuan-MT-Chimera-7B is Hunyuan-MT-7B fine-tuned for fusion (the README's model table: "Hunyuan 7B
    # translation ensemble model"), released with the same architecture, tokenizer and the same
    # recommended sampling; its hub tokenizer_config.json was not among the sources searched, so its chat
    # template is taken to be Hunyuan-MT-7B's (HUNYUAN_CHAT_TEMPLATE).
    CHIMERA: replace(_HUNYUAN_7B, kind=CHIMERA, sampling_model="Hunyuan-MT-Chimera-7B"),
    HY_MT15: _HY_MT15,
    HY_MT2: replace(_HY_MT15, kind=HY_MT2, sampling_model="Hy-MT2-1.8B"),
    MOE: TinySpec(
        MOE,
        HYV3,
        HYV3_SPECIAL_TOKENS,
        HYV3_SPECIAL_TOKENS[0],
        HYV3_SPECIAL_TOKENS[4],
        HYV3_SPECIAL_TOKENS[1],
        (HYV3_SPECIAL_TOKENS[4],),
        HYV3_CHAT_TEMPLATE,
        "Hy-MT2-30B-A3B",
    ),
}

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


def _train_tokenizer(special_tokens: tuple[str, ...]) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS.splitlines() * 4, trainer=trainer)
    return tok


def _model_config(spec: TinySpec, ids: dict[str, int]) -> Any:
    """A 2-layer config of the spec's architecture (the HYV3 one: 1 dense + 1 MoE layer of 4 experts)."""
    shared: dict[str, Any] = dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        bos_token_id=ids[spec.bos],
        eos_token_id=ids[spec.eos],
        pad_token_id=ids[spec.pad],
        architectures=[spec.architecture],
        dtype="float32",
    )
    if spec.architecture == HYV3:
        from transformers import HYV3Config

        moe = dict(
            num_experts=4,
            num_experts_per_tok=2,
            num_shared_experts=1,
            moe_intermediate_size=MOE_INTERMEDIATE_SIZE,
        )
        return HYV3Config(**shared, **moe, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    from transformers import HunYuanDenseV1Config

    # Hunyuan's dynamic NTK rope with alpha, as in the released dense configs.
    rope = {"rope_type": "dynamic", "alpha": 1000.0, "rope_theta": 10000.0, "factor": 1.0}
    eod = ids.get("<|endoftext|>", ids.get("<｜hy_end▁of▁sentence｜>"))
    return HunYuanDenseV1Config(**shared, tie_word_embeddings=True, rope_parameters=rope, eod_token_id=eod)


# Keys of the released HYV3 config.json (Tencent-Hunyuan/Hy-MT2, train/tools/check_converted.py: layer 0
# dense, the rest MoE; q/k norms) that vLLM's hy_v3 model reads and transformers' HYV3Config does not
# write: without them vLLM refuses the checkpoint ("first_k_dense_replace not exist").
MOE_INTERMEDIATE_SIZE = 64
RELEASED_HYV3_KEYS = {
    "first_k_dense_replace": 1,
    "expert_hidden_dim": MOE_INTERMEDIATE_SIZE,
    "route_norm": True,
    "qk_norm": True,
}


def _add_released_hyv3_keys(config_file: Path) -> None:
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config.update(RELEASED_HYV3_KEYS)
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _tokenizer(spec: TinySpec) -> Any:
    from transformers import PreTrainedTokenizerFast

    named = {spec.bos, spec.eos, spec.pad}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=_train_tokenizer(spec.special_tokens),
        bos_token=spec.bos,
        eos_token=spec.eos,
        pad_token=spec.pad,
        additional_special_tokens=[t for t in spec.special_tokens if t not in named],
        model_max_length=2048,
    )
    tokenizer.chat_template = spec.chat_template
    return tokenizer


def build_tiny_model(path: str | Path, seed: int = 0, kind: str = HUNYUAN_MT) -> Path:
    """Write a random-weight checkpoint of one generation (SPECS): weights, tokenizer, chat template."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    spec = SPECS[kind]
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(spec)
    vocab = tokenizer.get_vocab()
    ids = {token: vocab[token] for token in spec.special_tokens}
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(_model_config(spec, ids))
    model.save_pretrained(out)
    if spec.architecture == HYV3:
        _add_released_hyv3_keys(out / "config.json")
    tokenizer.save_pretrained(out)
    family = HY_MT2 if kind == MOE else kind
    sampling = sampling_defaults(family, spec.sampling_model).as_dict()
    generation = GenerationConfig(
        bos_token_id=ids[spec.bos],
        eos_token_id=[ids[token] for token in spec.stop_tokens],
        pad_token_id=ids[spec.pad],
        do_sample=True,
        **sampling,
    )
    generation.save_pretrained(out)
    (out / "README.md").write_text(
        f"Tiny random-weight {spec.architecture} checkpoint shaped like {spec.sampling_model} "
        "(`hunyuan-serve tiny-model`); output is noise.\n",
        encoding="utf-8",
    )
    return out


def chosen_family(family: str | None, directory: str) -> tuple[str, str]:
    """The generation to build: --family, else the one DIR's path names (the rule `up` places a model
    by, families/detect.py), else hunyuan-mt; with a line saying where it came from."""
    if family:
        return family, f"generation {family} (--family)"
    named = family_from_name(str(Path(directory).resolve()))
    if named and named != FEW_SHOT:
        return named, f"generation {named}, as the directory name says (--family picks another)"
    return HUNYUAN_MT, (
        f"generation {HUNYUAN_MT} (Hunyuan-MT-7B): the directory name names none (e.g. HY-MT1.5-1.8B); "
        "--family picks another"
    )


def _run(args: argparse.Namespace) -> int:
    family, said = chosen_family(args.family, args.dir)
    if args.moe and family != HY_MT2:
        print(
            f"hunyuan-serve tiny-model: --moe is Hy-MT2's HYV3 MoE, not {family}'s; "
            "use it with --family hy-mt2"
        )
        return 2
    kind = MOE if args.moe else family
    print(f"hunyuan-serve tiny-model: {said}")
    out = build_tiny_model(args.dir, seed=args.seed, kind=kind)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    print(f"tiny {config['architectures'][0]} checkpoint ({kind}) written to {out}")
    if family_from_name(str(out.resolve())) == family:
        print(f"its directory name places it in prompt family {family} (engine.prompt_family auto)")
    else:
        print(f"serve it from a directory named like {family} or with --prompt-family {family}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "tiny-model",
        help="Build a tiny random-weight checkpoint of a Hunyuan translation generation (tests, CI).",
        description="Build a tiny random-weight checkpoint of one generation's architecture, tokenizer "
        "layout and chat template in DIR, no downloads.",
    )
    parser.add_argument("dir", metavar="DIR", help="Output directory.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the random weights.")
    parser.add_argument(
        "--family",
        choices=[name for name in FAMILIES if name != FEW_SHOT],
        default=None,
        help="The generation: hunyuan-mt (Hunyuan-MT-7B), chimera (Hunyuan-MT-Chimera-7B), hy-mt1.5 or "
        "hy-mt2 (their 1.8B tokenizer). Default: the one DIR's name says (e.g. HY-MT1.5-1.8B-tiny), else "
        "hunyuan-mt.",
    )
    parser.add_argument("--moe", action="store_true", help="With --family hy-mt2: the HYV3 MoE (30B-A3B).")
    parser.set_defaults(func=_run)

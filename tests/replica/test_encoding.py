"""PromptEncoder's shortcuts (template spliced, tokenizer backend called) give exactly the full path's ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from hunyuan_serve.families import CHIMERA, FAMILIES
from hunyuan_serve.families.base import Features, FeatureUnsupported, Prompt
from hunyuan_serve.families.build import prompt_for
from hunyuan_serve.families.chimera import fusion_prompt
from hunyuan_serve.languages import find_language
from hunyuan_serve.models import model_config, model_family
from hunyuan_serve.replica.encoding import SPLICE_PROBES, PromptEncoder, encode_prompt, find_splice

DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "sd-webui-zh_CN.json"
ODD_TEXTS = [
    "  leading and trailing spaces  ",
    "line one\nline two\n\n",
    "tab\tand \\ backslash",
    "{{ not jinja }} {% raw %}",
    "<think>reasoning</think> answer",
    "<|extra_0|> <|startoftext|> <|eos|> <｜hy_User｜><｜hy_Assistant｜>",
    "emoji 🎉 and 中文 and ру́сский",
    "'quotes' \"double\"",
]
FEATURE_SETS = [
    Features(),
    Features(terms=(("settings", "设置"),)),
    Features(context="A dialog of an image generator."),
    Features(style="formal"),
    Features(preserve_format=True),
]
PAIRS = [("en", "zh"), ("zh", "en"), ("en", "fr"), ("ja", "zh")]


def _texts() -> list[str]:
    strings = [s for s in json.loads(DATA.read_text(encoding="utf-8")) if s.strip()]
    return strings[:60] + strings[-20:] + ODD_TEXTS


def _prompts(family: str) -> list[Prompt]:
    if family == CHIMERA:  # no prompt for a text alone: the fusion of the text's candidates
        return [
            fusion_prompt(find_language(s), find_language(t), text, [f"{text} (1)", f"{text} (2)"])
            for text in _texts()
            for s, t in PAIRS
        ]
    prompts = []
    for text in _texts():
        for source, target in PAIRS:
            for features in FEATURE_SETS:
                try:
                    prompts.append(
                        prompt_for(family, find_language(source), find_language(target), text, features)
                    )
                except FeatureUnsupported:
                    continue
    return prompts


@pytest.mark.parametrize("kind", ["hunyuan-mt", "hy-mt1.5", "hy-mt2", "hy-mt2-moe", "chimera"])
def test_ids_match_the_full_render_on_every_family(tiny_family_dirs: dict[str, Path], kind: str) -> None:
    model = str(tiny_family_dirs[kind])
    tokenizer = AutoTokenizer.from_pretrained(model)
    encoder = PromptEncoder(tokenizer, memo_size=0)  # no memo: every prompt goes through the shortcut
    assert encoder.backend is not None, "the backend shortcut is not in use, so nothing is tested"
    assert find_splice(tokenizer, (("role", "user"),)) is not None
    for family in {model_family("auto", model, model_config(model)), *FAMILIES}:
        prompts = _prompts(family)
        assert len(prompts) > len(_texts())
        for prompt in prompts:
            assert encoder.ids(prompt) == encode_prompt(tokenizer, prompt), (family, prompt)
    as_sent = [
        Prompt(messages=({"role": "user", "content": "x", "name": "ann"},)),
        Prompt(messages=({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"})),
        Prompt(text="Translate into Chinese: Hello\n"),
        Prompt(messages=({"role": "user", "content": ""},)),
    ]
    for prompt in as_sent:
        assert encoder.ids(prompt) == encode_prompt(tokenizer, prompt), prompt
    ids = encode_prompt(tokenizer, as_sent[1])
    assert encoder.decode(ids) == tokenizer.decode(ids, skip_special_tokens=True)


def test_a_template_that_changes_the_content_is_rendered_in_full(tiny_model_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = "<|startoftext|>{{ messages[0]['content'] | trim }}<|extra_0|>"
    assert find_splice(tokenizer, (("role", "user"),)) is None
    encoder = PromptEncoder(tokenizer, memo_size=0)
    for probe in SPLICE_PROBES:
        prompt = Prompt(messages=({"role": "user", "content": probe},))
        assert encoder.ids(prompt) == encode_prompt(tokenizer, prompt)

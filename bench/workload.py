"""The bench's workload: the WebUI strings, each with its prompt as a replica builds it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import targets
from bench.procs import REPO

DATA = REPO / "bench" / "data" / "sd-webui-zh_CN.json"


# A chat prompt rendered as the replica's engine renders it: ending where the answer starts.
GENERATE = {"add_generation_prompt": True}


def build_items(model: Path, out: Path, limit: int | None = None) -> None:
    """The workload with each string's prompt as the stack builds it, for the vLLM server baseline.
    Blank strings are left out: there is nothing to translate (the service answers them 422).
    """
    texts = [text for text in json.loads(DATA.read_text(encoding="utf-8")) if text.strip()]
    if limit:
        texts = texts[:limit]
    prompts = _prompts(model, texts)
    out.write_text(json.dumps(prompts, ensure_ascii=False), encoding="utf-8")


def _prompts(model: Path, texts: list[str]) -> list[dict[str, Any]]:
    """Completion prompts as the replica builds them (chat prompts rendered by the model's template)."""
    from hunyuan_serve.families.build import build_prompt
    from hunyuan_serve.languages import find_language

    family = targets.model_family(str(model))
    source, target = find_language("en"), find_language("zh")
    tokenizer: Any = None  # loaded for the first chat prompt only
    items = []
    for text in texts:
        prompt = build_prompt(family, source, target, text)
        rendered = prompt.text
        if prompt.is_chat:
            tokenizer = tokenizer or _tokenizer(model)
            chat = tokenizer.apply_chat_template(
                list(prompt.messages), tokenize=False, add_generation_prompt=True
            )
            rendered = str(chat)
        items.append({"text": text, "prompt": rendered, "stop": list(prompt.stop) or None})
    return items


def _tokenizer(model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model))


def translate_body() -> dict[str, Any]:
    return {"text": "Open file", "source_lang": "en", "target_lang": "zh", "max_tokens": 16}

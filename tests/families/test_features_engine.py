"""A replica app with the real vLLM engine on each tiny checkpoint answers /translate with each feature."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.families import hunyuan_mt, hy_mt2, hy_mt15
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.models import model_config, model_family
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from hunyuan_serve.replica.engine.vllm_engine import VllmEngine
from tests.support.replica_fakes import serve_in_thread, wait_ready

pytestmark = pytest.mark.engine

TEXT = "Click <b>Save</b> on the GPU."
# The chat layout each tiny checkpoint's published template gives one user turn (tiny_model.py cites each
# source; tests/families/test_engine_families.py pins the same layouts).
HY_LAYOUT = "<｜hy_begin▁of▁sentence｜><｜hy_User｜>{}<｜hy_Assistant｜>"
LAYOUT = {
    "hunyuan-mt": "<|startoftext|>{}<|extra_0|>",
    "hy-mt1.5": HY_LAYOUT,
    "hy-mt2": HY_LAYOUT,
    "hy-mt2-moe": HY_LAYOUT + "<think></think>",
}
GLOSSARY = {"GPU": "显卡", "VAE": "变分自编码器"}  # only GPU occurs in TEXT, so only it is sent
CONTEXT = "A hardware review."
# (request fields, the user message the family's published template gives: families' tables, which cite
# Tencent-Hunyuan/HY-MT README.md "Prompts" and Tencent-Hunyuan/Hy-MT2 README.md's instruction table)
HY_MT15_CASES: list[tuple[dict[str, Any], str]] = [
    ({}, hy_mt15.EN_TEMPLATE.format(target="French", text=TEXT)),
    (
        {"glossary": GLOSSARY},
        hy_mt15.TERMS_HEAD
        + hy_mt15.TERM_LINE.format(source="GPU", target="显卡")
        + hy_mt15.TERMS_TAIL.format(target="法语", text=TEXT),
    ),
    ({"context": CONTEXT}, hy_mt15.CONTEXT_TEMPLATE.format(context=CONTEXT, target="法语", text=TEXT)),
    (
        {"preserve_format": True},
        hy_mt15.FORMAT_TEMPLATE.format(target="法语", text="Click <s1>Save</s1> on the GPU."),
    ),
]
HY_MT2_CASES: list[tuple[dict[str, Any], str]] = [
    ({}, hy_mt2.DEFAULT["en"].format(target="French", text=TEXT)),
    (
        {"glossary": GLOSSARY},
        hy_mt2.TERMS["en"][0]
        + hy_mt2.TERMS["en"][1].format(source="GPU", target="显卡")
        + hy_mt2.TERMS["en"][2].format(target="French", text=TEXT),
    ),
    ({"context": CONTEXT}, hy_mt2.BACKGROUND["en"].format(context=CONTEXT, target="French", text=TEXT)),
    ({"style": "formal"}, hy_mt2.STYLE_TEMPLATE["en"].format(style="formal", target="French", text=TEXT)),
]
CASES: dict[str, list[tuple[dict[str, Any], str]]] = {
    "hunyuan-mt": [({}, hunyuan_mt.EN_TEMPLATE.format(target="French", text=TEXT))],
    "hy-mt1.5": HY_MT15_CASES,
    "hy-mt2": HY_MT2_CASES,
    "hy-mt2-moe": HY_MT2_CASES,
}
# A feature each family lacks, answered 400 by the real app before the engine is asked.
LACKS = {
    "hunyuan-mt": "glossary",
    "hy-mt1.5": "style",
    "hy-mt2": "preserve_format",
    "hy-mt2-moe": "preserve_format",
}
LACKING_FIELDS: dict[str, Any] = {"glossary": GLOSSARY, "style": "formal", "preserve_format": True}


@dataclass
class RecordingEngine(VllmEngine):
    """The real engine, keeping the chat text it rendered and the token ids it sent for every generation."""

    sent: list[tuple[str, list[int]]] = field(default_factory=list)

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        chat = self._tokenizer.apply_chat_template(
            list(prompt.messages), tokenize=False, add_generation_prompt=True
        )
        self.sent.append((chat, list(self._token_ids(prompt))))
        return await super().generate(prompt, sampling, request_id, priority)


def _config(model: Path) -> ServeConfig:
    return ServeConfig.model_validate(
        {
            "engine": {
                "model": str(model),
                "device": "cpu",
                "dtype": "float32",
                "max_model_len": 512,
                "kv_cache_memory_bytes": 64 * 2**20,
                "enforce_eager": True,
                "max_num_seqs": 4,
            },
            "replica": {"cache_entries": 0, "warmup_timeout_s": 300},
        }
    )


@pytest.fixture(autouse=True)
def _environ_restored() -> Iterator[None]:
    """The in-process engine sets vLLM's CPU variables in os.environ; later tests must not inherit them."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.parametrize("kind", list(CASES))
def test_replica_on_each_tiny_checkpoint_sends_the_published_prompt_of_each_feature(
    kind: str, tiny_family_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_HOST_IP", os.environ.get("VLLM_HOST_IP", "127.0.0.1"))
    model = tiny_family_dirs[kind]
    cfg = _config(model)
    # The family as the replica command chooses it (replica/command.py), from the directory's name.
    family = model_family("auto", str(model), model_config(str(model)))
    engine = RecordingEngine(cfg.engine, str(model), ignore_eos=True, device="cpu")
    with (
        serve_in_thread(create_app(engine, cfg, family)) as url,
        httpx.Client(base_url=url, timeout=120) as client,
    ):
        wait_ready(client, timeout_s=300)
        assert client.get("/health").json()["family"] == family
        tokenizer = engine._tokenizer
        base = {"text": TEXT, "source_lang": "en", "target_lang": "fr", "max_tokens": 4, "temperature": 0.0}
        for fields, user_message in CASES[kind]:
            response = client.post("/translate", json={**base, **fields})
            assert response.status_code == 200, (fields, response.text)
            chat, ids = engine.sent[-1]
            expected = LAYOUT[kind].format(user_message)
            assert chat == expected, fields
            assert ids == tokenizer(expected, add_special_tokens=False)["input_ids"], fields
            if fields.get("preserve_format"):
                _check_formatted(response.json())
        lacking = LACKS[kind]
        calls = len(engine.sent)
        refused = client.post("/translate", json={**base, lacking: LACKING_FIELDS[lacking]})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "unsupported_feature"
        assert f"no official prompt for {lacking}" in refused.json()["error"]["message"]
        assert len(engine.sent) == calls


def _check_formatted(body: dict[str, Any]) -> None:
    # Random weights do not answer <target><s1>...</s1></target>: the tag is reported lost and no <sN>
    # tag, nor half of <b>...</b>, reaches the caller.
    assert body["format_lost"] == ["<b></b>"], body
    assert "<s1>" not in body["result"] and "</s1>" not in body["result"]
    assert body["result"].count("<b>") == body["result"].count("</b>")

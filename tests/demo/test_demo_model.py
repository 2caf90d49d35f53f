"""The embedded demo model end to end: converted Gemma 3 270M loads in vLLM and translates UI strings,
and chats through the official `openai` client with the chat template it carries.

One demo engine for the module: `up` on the converted checkpoint (Nginx and one replica), as `make up`
serves it on a machine without a GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest

from hunyuan_serve.demo_model import (
    BOS_ID,
    DONE_MARKER,
    END_OF_TURN,
    GEMMA3_CHAT_TEMPLATE,
    GEMMA_NOTICE,
    LAYOUT_VERSION,
    ensure_demo_model,
    is_complete,
    layout_version,
)
from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.families.detect import family_from_config, read_model_config
from hunyuan_serve.languages import find_language
from hunyuan_serve.replica.apis.openai_schema import fold_system
from tests.support.stacks import free_ports, replicas_ready, started, tiny_up

# WebUI strings with their human zh_CN translation (bench/data), which greedy decoding gets exactly.
EXACT = {"Delete": "删除", "Cancel": "取消"}
TEXTS = [*EXACT, "Save images", "Sampling method"]
DEMO_KV_CACHE_BYTES = 256 * 1024 * 1024
READY_TIMEOUT_S = 600.0  # the demo engine's start on two shared cores, its first compile included
CHAT_TOKENS = 8

pytestmark = [pytest.mark.demo, pytest.mark.nginx]


@dataclass
class DemoStack:
    url: str
    client: openai.OpenAI
    model: str


@pytest.fixture(scope="module")
def demo_dir() -> Path:
    """The cached conversion (converted here, about 2-3 minutes, when the cache is empty)."""
    return ensure_demo_model()


@pytest.fixture(scope="module")
def demo_stack(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoStack]:
    """`up` serving the demo checkpoint, and the official client on it (no retries: a failure shows)."""
    work = tmp_path_factory.mktemp("demo-stack")
    port, base = free_ports(2)
    cmd = tiny_up(demo_dir, work / "run", port, base, max_tokens=16)
    cmd[cmd.index("--kv-cache-memory-bytes") + 1] = str(DEMO_KV_CACHE_BYTES)
    url = f"http://127.0.0.1:{port}"
    ready = replicas_ready(url, 1)
    with started(cmd, log=work / "up.log", ready=ready, timeout_s=READY_TIMEOUT_S, env=dict(os.environ)):
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=300)
        with client:
            yield DemoStack(url, client, client.models.list().data[0].id)


@pytest.fixture(scope="module")
def greedy_answers(demo_stack: DemoStack) -> dict[str, str]:
    """The demo engine's greedy answer to the few-shot prompt of each of TEXTS, 16 tokens at most."""
    en, zh = find_language("en"), find_language("zh")
    prompts = [build_prompt("few_shot", en, zh, text) for text in TEXTS]
    answer = demo_stack.client.completions.create(
        model=demo_stack.model,
        prompt=[p.text for p in prompts],
        max_tokens=16,
        temperature=0,
        stop=list(prompts[0].stop),
    )
    choices = sorted(answer.choices, key=lambda choice: choice.index)
    return dict(zip(TEXTS, [choice.text for choice in choices], strict=True))


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


def test_checkpoint_carries_gemma3_chat_template_and_turn_stop(demo_dir: Path) -> None:
    from transformers import AutoTokenizer

    assert layout_version(demo_dir) == LAYOUT_VERSION
    tok = AutoTokenizer.from_pretrained(str(demo_dir))
    assert tok.chat_template == GEMMA3_CHAT_TEMPLATE
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    rendered = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert rendered == "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    eos = json.loads((demo_dir / "generation_config.json").read_text(encoding="utf-8"))["eos_token_id"]
    assert eos == [tok.eos_token_id, tok.convert_tokens_to_ids(END_OF_TURN)]


def test_checkpoint_of_an_older_layout_is_brought_up_to_date(demo_dir: Path, tmp_path: Path) -> None:
    """A cache converted before the chat template: the next use adds it, and keeps the weights."""
    old = tmp_path / demo_dir.name
    shutil.copytree(demo_dir, old, copy_function=os.link)  # hard links: the 0.5 GB of weights not copied
    for name in ("chat_template.jinja", "generation_config.json", DONE_MARKER):
        (old / name).unlink()
        if name != "chat_template.jinja":  # written anew, not through the links into the real cache
            (old / name).write_text(json.dumps({"eos_token_id": 1} if name.startswith("gen") else {}))
    weights = (old / "model.safetensors").stat()
    assert layout_version(old) == 1 and not is_complete(old)

    assert ensure_demo_model(tmp_path) == old
    assert is_complete(old) and layout_version(old) == LAYOUT_VERSION
    assert (old / "chat_template.jinja").read_text(encoding="utf-8") == GEMMA3_CHAT_TEMPLATE
    assert json.loads((old / "generation_config.json").read_text())["eos_token_id"] == [1, 106]
    after = (old / "model.safetensors").stat()
    assert (after.st_ino, after.st_mtime_ns) == (weights.st_ino, weights.st_mtime_ns)


def _chat(system: str, user: str) -> list[openai.types.chat.ChatCompletionMessageParam]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _prompt_tokens(demo_dir: Path, messages: list[openai.types.chat.ChatCompletionMessageParam]) -> int:
    """The tokens of the chat as the replica sends it: system text folded first, Gemma 3's template."""
    from transformers import AutoTokenizer

    pairs = [(str(m["role"]), str(m["content"])) for m in messages]
    turns = list(fold_system(pairs, "prepend"))
    tok = AutoTokenizer.from_pretrained(str(demo_dir))
    return len(tok.apply_chat_template(turns, tokenize=True, add_generation_prompt=True, return_dict=False))


def test_chat_answers_through_the_openai_client(demo_stack: DemoStack, demo_dir: Path) -> None:
    messages = _chat("Translate the user's text into Chinese.", "Open file")
    answer = demo_stack.client.chat.completions.create(
        model=demo_stack.model, messages=messages, max_tokens=CHAT_TOKENS, temperature=0
    )
    choice = answer.choices[0]
    assert choice.message.role == "assistant" and choice.message.content, answer
    assert choice.finish_reason in ("stop", "length")
    usage = answer.usage
    assert usage is not None and 0 < usage.completion_tokens <= CHAT_TOKENS
    assert usage.prompt_tokens == _prompt_tokens(demo_dir, messages)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_chat_streams_through_the_openai_client(demo_stack: DemoStack, demo_dir: Path) -> None:
    messages = _chat("Translate the user's text into Chinese.", "Delete the file")
    stream = demo_stack.client.chat.completions.create(
        model=demo_stack.model,
        messages=messages,
        max_tokens=CHAT_TOKENS,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text and finishes in (["stop"], ["length"]), chunks
    usage = chunks[-1].usage
    assert usage is not None and 0 < usage.completion_tokens <= CHAT_TOKENS
    assert usage.prompt_tokens == _prompt_tokens(demo_dir, messages)
    # The same chat whole: greedy decoding gives the text the stream gave.
    whole = demo_stack.client.chat.completions.create(
        model=demo_stack.model, messages=messages, max_tokens=CHAT_TOKENS, temperature=0
    )
    assert whole.choices[0].message.content == text

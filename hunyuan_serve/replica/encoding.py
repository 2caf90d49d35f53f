"""A prompt's token ids as the engine gets them, with the template rendered once per message shape."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from hunyuan_serve.cache.memory import LruCache
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.replica.errors import NoChatTemplate

# Contents the template is tried with before its rendering is spliced: a template that treats any of
# them other than by pasting it between a fixed head and tail (strips it, looks for a think block or a
# control token in it, escapes it) is rendered in full for every prompt instead.
SPLICE_PROBES = (
    "a",
    " b \n\n",
    "\n",
    "<think>x</think> y",
    "{{ c }} {% d %} <|extra_0|><|startoftext|><｜hy_User｜><｜hy_Assistant｜>",
    "translate: 'x' \"y\" \\ z\t",
)
_MARK = "\x00hunyuan-serve-splice\x00"
ShapeKey = tuple[tuple[tuple[str, str], ...], ...]
logger = logging.getLogger(__name__)


def render_chat(tokenizer: Any, messages: Sequence[dict[str, str]]) -> str:
    """The tokenizer's chat template, as vLLM's server applies it to a chat request; NoChatTemplate when
    the checkpoint has none (transformers' own error would read as the engine's failure)."""
    if not getattr(tokenizer, "chat_template", None):
        raise NoChatTemplate()
    return str(tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True))


def find_splice(tokenizer: Any, others: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    """(head, tail) such that the template renders one message of these other fields as head + content
    + tail for every probe content; None when it does not (that shape is then rendered in full)."""
    rendered = render_chat(tokenizer, [{**dict(others), "content": _MARK}])
    if rendered.count(_MARK) != 1:
        return None
    head, _, tail = rendered.partition(_MARK)
    for probe in SPLICE_PROBES:
        if render_chat(tokenizer, [{**dict(others), "content": probe}]) != head + probe + tail:
            return None
    return head, tail


def encode_prompt(tokenizer: Any, prompt: Prompt) -> list[int]:
    """The full path PromptEncoder must match: the template rendered, then the tokenizer called."""
    if prompt.is_chat:
        return list(tokenizer(render_chat(tokenizer, prompt.messages), add_special_tokens=False)["input_ids"])
    return list(tokenizer(prompt.text)["input_ids"])


class PromptEncoder:
    """Token ids of prompts, kept for the budget check and the generation of one request.

    Byte-identical to encode_prompt (the template rendered in full, then the tokenizer called): the
    template's rendering of a one-message prompt is spliced (its head and tail found once per shape,
    checked with SPLICE_PROBES), and the text is encoded by the fast tokenizer's backend directly,
    which transformers' tokenizer call wraps in Python per string. Either shortcut is used only where
    it gives the same result as the full path on probe prompts.
    """

    def __init__(self, tokenizer: Any, memo_size: int) -> None:
        self.tokenizer = tokenizer
        self.memo: LruCache[tuple[Any, str], list[int]] = LruCache(memo_size)
        self._splices: dict[ShapeKey, tuple[str, str] | None] = {}
        self.backend = _checked_backend(tokenizer)

    def ids(self, prompt: Prompt) -> list[int]:
        key = (tuple(tuple(sorted(m.items())) for m in prompt.messages), prompt.text)
        ids = self.memo.get(key)
        if ids is None:
            ids = self._encode(prompt)
            self.memo.put(key, ids)
        return ids

    def chat_text(self, messages: Sequence[dict[str, str]]) -> str:
        """The rendered template: spliced for one message of a shape the probes passed, else in full."""
        if len(messages) != 1 or not messages[0].get("content"):
            return render_chat(self.tokenizer, messages)
        others = tuple(sorted((k, v) for k, v in messages[0].items() if k != "content"))
        shape = (others,)
        if shape not in self._splices:
            self._splices[shape] = find_splice(self.tokenizer, others)
            if self._splices[shape] is None:
                logger.info("chat template rendered in full for messages shaped %s", others)
        splice = self._splices[shape]
        if splice is None:
            return render_chat(self.tokenizer, messages)
        return splice[0] + messages[0]["content"] + splice[1]

    def _encode(self, prompt: Prompt) -> list[int]:
        if prompt.is_chat:
            return self.encode_text(self.chat_text(prompt.messages), special=False)
        return self.encode_text(prompt.text, special=True)

    def encode_text(self, text: str, special: bool) -> list[int]:
        if self.backend is not None:
            return list(self.backend.encode(text, add_special_tokens=special).ids)
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        if self.backend is not None:
            return str(self.backend.decode(list(ids), skip_special_tokens=True))
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))


def _checked_backend(tokenizer: Any) -> Any:
    """The fast tokenizer's `tokenizers.Tokenizer`, if it encodes and decodes the probes exactly as the
    transformers tokenizer does (a tokenizer that adds its own Python steps would not); else None."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    texts = list(SPLICE_PROBES)
    if getattr(tokenizer, "chat_template", None):
        texts.append(render_chat(tokenizer, [{"role": "user", "content": SPLICE_PROBES[-1]}]))
    for text in texts:
        for special in (False, True):
            expected = list(tokenizer(text, add_special_tokens=special)["input_ids"])
            if list(backend.encode(text, add_special_tokens=special).ids) != expected:
                logger.info("tokenizer encoded through transformers: its backend differs on %r", text)
                return None
            if backend.decode(expected, skip_special_tokens=True) != tokenizer.decode(
                expected, skip_special_tokens=True
            ):
                return None
    return backend

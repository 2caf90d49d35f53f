"""An engine stand-in (engine.stand_in): the real template and tokenizer, no model, answers at once."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path

from hunyuan_serve.config import EngineConfig
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.models import served_name
from hunyuan_serve.replica.encoding import PromptEncoder
from hunyuan_serve.replica.engine.interface import ENCODED_MEMO_SIZE, Delta, EngineStats, Generation, Sampling

STAND_IN = "stand-in"
# vLLM's own fallback when neither the config nor the checkpoint names a context length.
DEFAULT_MAX_MODEL_LEN = 2048


def checkpoint_max_len(model: str) -> int:
    """max_position_embeddings of a local checkpoint's config.json (what vLLM derives max_model_len from)."""
    path = Path(model) / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return DEFAULT_MAX_MODEL_LEN
    return int(data.get("max_position_embeddings") or DEFAULT_MAX_MODEL_LEN)


@dataclass
class StandInEngine:
    """The Engine protocol without a model, so a bench measures only the serving layer around it.

    Everything the replica's process does outside vLLM's generate stays real: the chat template is
    rendered and tokenized (the budget check reads the true count) and the answer is detokenized. The
    answer echoes the prompt's last stand_in_output_tokens ids (the text's end): realistic sizes.
    """

    cfg: EngineConfig
    model: str
    model_name: str = ""
    max_model_len: int = 0
    stats: EngineStats = field(default_factory=EngineStats)
    kind: str = STAND_IN
    _encoder: PromptEncoder | None = None

    async def start(self) -> None:
        if self._encoder is not None:
            return
        self._encoder = await asyncio.to_thread(self._load)
        configured = self.cfg.max_model_len
        self.max_model_len = configured or checkpoint_max_len(self.model)
        self.model_name = served_name(self.model, self.cfg.served_model_name)

    def _load(self) -> PromptEncoder:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(
            self.cfg.tokenizer or self.model, trust_remote_code=self.cfg.trust_remote_code
        )
        return PromptEncoder(tokenizer, ENCODED_MEMO_SIZE)

    @property
    def encoder(self) -> PromptEncoder:
        if self._encoder is None:
            raise RuntimeError("stand-in engine not started")
        return self._encoder

    def count_prompt_tokens(self, prompt: Prompt) -> int:
        return len(self.encoder.ids(prompt))

    def _answer(self, prompt: Prompt, sampling: Sampling, started: float) -> Generation:
        ids = self.encoder.ids(prompt)
        count = min(self.cfg.stand_in_output_tokens, sampling.max_tokens)
        out = ids[-count:]  # the prompt's end: the text's last tokens (control tokens are skipped)
        self.stats.record(0, 0)  # one "step" per answer: the stall watch sees progress
        text = self.encoder.decode(out).strip()
        return Generation(
            text=text or "-",
            prompt_tokens=len(ids),
            output_tokens=len(out),
            finish_reason="length" if len(out) >= sampling.max_tokens else "stop",
            engine_s=time.monotonic() - started,
        )

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        return self._answer(prompt, sampling, time.monotonic())

    async def sample(
        self, prompt: Prompt, sampling: Sampling, request_id: str, n: int, priority: int = 0
    ) -> list[Generation]:
        # An ensemble's candidates: the same answer n times (the layer's cost is the point, not variety).
        return [self._answer(prompt, sampling, time.monotonic()) for _ in range(n)]

    async def stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> AsyncGenerator[Delta, None]:
        generation = self._answer(prompt, sampling, time.monotonic())
        yield Delta(generation.text)
        yield Delta("", generation)

    async def abort(self, request_id: str) -> None:
        return None

    def is_alive(self) -> bool:
        return self._encoder is not None

    def unfinished(self) -> int:
        return 0

    def shutdown(self) -> None:
        self._encoder = None

"""Runs vLLM's offline engine on checkpoints in a child process; prints what each rendered and generated.

vLLM's Transformers backend patches the transformers model classes it loads, in place, for good: a
checkpoint of that class can no longer be built in the same process. So tests that need the engine
in-process run it here, in a process of its own (often started ahead: tests/support/ahead.py).
Input (stdin): a JSON list of jobs, each one of
- {"model", "messages"}: the chat rendered by the checkpoint's template, 4 greedy tokens on its ids;
  answer {"chat", "prompt_token_ids", "sent_token_ids", "output_token_ids"};
- {"model", "prompts", "max_tokens", "stop"}: greedy completions of raw prompts; answer {"texts"}.
"model" "demo" is the embedded demo model (converted first, or waited for: demo_model's file lock);
"kv_cache_bytes" is optional. Output (stdout, last line): the JSON list of answers, one per job.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from typing import Any


def run(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from vllm import LLM
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    results = []
    for job in jobs:
        llm = LLM(
            model=_model(job["model"]),
            dtype="float32",
            enforce_eager=True,
            max_model_len=512,
            kv_cache_memory_bytes=int(job.get("kv_cache_bytes", 64 * 1024 * 1024)),
            distributed_executor_backend="uni",
            seed=0,
        )
        results.append(_completions(llm, job) if "prompts" in job else _chat(llm, job))
        del llm
        gc.collect()
        cleanup_dist_env_and_memory()
    return results


def _model(name: str) -> str:
    if name != "demo":
        return name
    from hunyuan_serve.demo_model import ensure_demo_model

    return str(ensure_demo_model())


def _chat(llm: Any, job: dict[str, Any]) -> dict[str, Any]:
    from vllm import SamplingParams

    tokenizer = llm.get_tokenizer()
    chat = tokenizer.apply_chat_template(job["messages"], tokenize=False, add_generation_prompt=True)
    ids = tokenizer(chat, add_special_tokens=False)["input_ids"]
    params = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    out = llm.generate([{"prompt_token_ids": ids}], params)[0]
    return {
        "chat": chat,
        "prompt_token_ids": list(out.prompt_token_ids),
        "sent_token_ids": list(ids),
        "output_token_ids": list(out.outputs[0].token_ids),
    }


def _completions(llm: Any, job: dict[str, Any]) -> dict[str, Any]:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=int(job["max_tokens"]), stop=list(job["stop"]))
    outputs = llm.generate(list(job["prompts"]), params, use_tqdm=False)
    return {"texts": [out.outputs[0].text for out in outputs]}


if __name__ == "__main__":
    for key, value in {
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }.items():
        os.environ.setdefault(key, value)
    answer = run(json.loads(sys.stdin.read()))
    print(json.dumps(answer, ensure_ascii=False))

"""Runs vLLM's offline engine on checkpoints in a child process; prints what each rendered and generated.

vLLM's Transformers backend patches the transformers model classes it loads, in place, for good: a
checkpoint of that class can no longer be built in the same process. So tests that need the engine
in-process run it here, in a process of its own. Input (stdin): a JSON list of {"model", "messages"};
output (stdout, last line): a JSON list of {"chat", "prompt_token_ids", "output_token_ids"}.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from typing import Any


def run(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from vllm import LLM, SamplingParams
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    results = []
    for job in jobs:
        llm = LLM(
            model=job["model"],
            dtype="float32",
            enforce_eager=True,
            max_model_len=512,
            kv_cache_memory_bytes=64 * 1024 * 1024,
            distributed_executor_backend="uni",
            seed=0,
        )
        tokenizer = llm.get_tokenizer()
        chat = tokenizer.apply_chat_template(job["messages"], tokenize=False, add_generation_prompt=True)
        ids = tokenizer(chat, add_special_tokens=False)["input_ids"]
        params = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
        out = llm.generate([{"prompt_token_ids": ids}], params)[0]
        results.append(
            {
                "chat": chat,
                "prompt_token_ids": list(out.prompt_token_ids),
                "sent_token_ids": list(ids),
                "output_token_ids": list(out.outputs[0].token_ids),
            }
        )
        del llm, tokenizer
        gc.collect()
        cleanup_dist_env_and_memory()
    return results


if __name__ == "__main__":
    for key, value in {
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }.items():
        os.environ.setdefault(key, value)
    answer = run(json.loads(sys.stdin.read()))
    print(json.dumps(answer, ensure_ascii=False))

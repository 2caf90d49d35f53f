"""The engine limit: offline `vllm.LLM(...).generate` with a replica's engine settings, rounds on cue."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

# How often a waiting engine looks for its cue: the start of a round is late by this much at most.
POLL_S = 0.002


def build_llm(model: str, on_cpu: bool) -> Any:
    """vLLM's offline engine with the keyword arguments a replica gives AsyncEngineArgs (engine_kwargs
    of the bench's ENGINE): same dtype, eager mode, max_num_seqs, context, executor."""
    from vllm import LLM

    from bench.targets import ENGINE
    from hunyuan_serve.replica.engine.args import engine_kwargs

    return LLM(**engine_kwargs(ENGINE, model, on_cpu))


def params(sampling: dict[str, Any]) -> Any:
    """The family's sampling, EOS ignored and a fixed max_tokens: every string costs the same."""
    from vllm import SamplingParams

    return SamplingParams(**sampling, ignore_eos=True)


def run_round(llm: Any, prompts: list[list[int]], sampling: Any) -> dict[str, float]:
    """Generate every prompt (token ids, as the replica tokenizes them) at once; time it."""
    batch = [{"prompt_token_ids": ids} for ids in prompts]
    started = time.time()
    outputs = llm.generate(batch, sampling, use_tqdm=False)
    ended = time.time()
    return {
        "start": started,
        "end": ended,
        "count": len(outputs),
        "tokens": sum(len(o.outputs[0].token_ids) for o in outputs),
        "prompt_tokens": sum(len(o.prompt_token_ids or ()) for o in outputs),
    }


def wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(POLL_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--dir", type=Path, required=True, help="Where the cues, prompts and results lie.")
    parser.add_argument("--index", type=int, required=True, help="This engine's number.")
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--sampling", required=True, help="JSON: the SamplingParams fields, max_tokens too.")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    llm = build_llm(args.model, args.device == "cpu")
    sampling = params(json.loads(args.sampling))
    warm = json.loads((args.dir / f"prompts-{args.index}-0.json").read_text())[:8]
    run_round(llm, warm, sampling)  # lazy first-step work stays out of the measured rounds
    (args.dir / f"ready-{args.index}").touch()
    for number in range(args.rounds):
        # Every engine waits for the same cue, so that they run at once, as the replicas do.
        wait_for(args.dir / f"go-{number}")
        prompts = json.loads((args.dir / f"prompts-{args.index}-{number}.json").read_text())
        result = run_round(llm, prompts, sampling)
        out = args.dir / f"result-{args.index}-{number}.json"
        out.with_suffix(".tmp").write_text(json.dumps(result))
        out.with_suffix(".tmp").rename(out)


if __name__ == "__main__":
    main()

"""The replica's engine adapter on real vLLM: CPU per string in the replica's own process.

vLLM's AsyncLLM runs its engine core in a child process; what stays in the replica's process is
vLLM's frontend (request intake, output processing, detokenization, stats) and our adapter around
it. This runs N unique WebUI strings through `VllmEngine.generate` at once, the engine pinned with
the replica's CPU settings, and reads this process's CPU time (its child, the engine core, apart).
--code runs another checkout's hunyuan_serve (a worktree of an older commit), so that a before and
an after alternate within one run, each in a fresh process:

    git worktree add /tmp/frontend-before 8177a55
    flock /tmp/hs-heavy.lock .venv/bin/python -m bench.frontend --code /tmp/frontend-before
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# No bench import at the top: a --code round runs this file with another checkout first on the path.
REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data" / "sd-webui-zh_CN.json"
MAX_TOKENS = 16


async def measure(model: str, count: int, core: int) -> dict[str, float | str]:
    """One round in this process: count strings at once through VllmEngine.generate, EOS ignored."""
    from bench.targets import ENGINE  # the checkout's own: every one since 8177a55 has it
    from hunyuan_serve.families.build import build_prompt
    from hunyuan_serve.languages import find_language
    from hunyuan_serve.replica.engine.interface import Sampling
    from hunyuan_serve.replica.engine.vllm_engine import VllmEngine

    os.sched_setaffinity(0, {core})
    engine = VllmEngine(ENGINE, model, ignore_eos=True)
    await engine.start()
    texts = list(json.loads(DATA.read_text(encoding="utf-8")))[:count]
    en, zh = find_language("en"), find_language("zh")
    prompts = [build_prompt("hunyuan-mt", en, zh, f"{text} #{i}") for i, text in enumerate(texts)]
    sampling = Sampling(temperature=0.7, top_p=0.6, top_k=20, repetition_penalty=1.05, max_tokens=MAX_TOKENS)
    try:
        await asyncio.gather(*(engine.generate(p, sampling, f"warm-{i}") for i, p in enumerate(prompts[:32])))
        wall, cpu = time.monotonic(), time.process_time()
        done = await asyncio.gather(*(engine.generate(p, sampling, f"r-{i}") for i, p in enumerate(prompts)))
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    finally:
        engine.shutdown()
    tokens = sum(g.output_tokens for g in done)
    import hunyuan_serve

    code = str(Path(hunyuan_serve.__file__).resolve().parent.parent)
    return {
        "cpu_us_per_string": 1e6 * cpu / count,
        "strings_per_s": count / wall,
        "tokens": tokens,
        "code": code,
    }


def round_in(code: Path, model: str, count: int, core: int) -> dict[str, float]:
    """One round in a fresh interpreter running code's hunyuan_serve (vLLM keeps global state)."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    argv = [sys.executable, str(Path(__file__).resolve()), "--one", "--model", model, "--count", str(count)]
    done = subprocess.run([*argv, "--core", str(core)], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"round in {code} failed:\n{done.stderr[-3000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(figures.pop("code")) != code.resolve():
        raise RuntimeError(f"the round ran hunyuan_serve from elsewhere than {code}")
    return dict(figures)


def tiny_model() -> str:
    from hunyuan_serve.tiny_model import build_tiny_model

    return str(build_tiny_model(Path(tempfile.mkdtemp(prefix="frontend-")) / "tiny-hunyuan-mt"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.frontend", description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="Checkpoint (default: a fresh tiny Hunyuan-MT one).")
    parser.add_argument("--count", type=int, default=512, help="Strings per round, sent at once.")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of each side, alternating.")
    parser.add_argument("--core", type=int, default=0, help="The core the replica's process runs on.")
    parser.add_argument("--code", type=Path, help="A checkout to compare with (its rounds alternate).")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    model = args.model or tiny_model()
    if args.one:
        print(json.dumps(asyncio.run(measure(model, args.count, args.core))))
        return 0
    sides = {"this checkout": REPO, **({f"--code {args.code}": args.code} if args.code else {})}
    seen: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for number in range(1, args.rounds + 1):
        for name, code in sides.items():
            figures = round_in(code, model, args.count, args.core)
            seen[name].append(figures)
            print(
                f"round {number} {name}: {figures['cpu_us_per_string']:.0f} CPU-µs per string in the "
                f"replica's process, {figures['strings_per_s']:.1f} strings/s, {figures['tokens']:.0f} tokens"
            )
    for name, rounds in seen.items():
        cpu = statistics.median(r["cpu_us_per_string"] for r in rounds)
        rate = statistics.median(r["strings_per_s"] for r in rounds)
        print(f"median {name}: {cpu:.0f} CPU-µs per string, {rate:.1f} strings/s ({len(rounds)} rounds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

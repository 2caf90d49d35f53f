"""HTTP layer overhead: N concurrent requests via the replica API vs the same prompts straight to the engine.

Both paths share one engine in one process and alternate in rounds, so the ratio compares like with like
on a noisy machine. Default model: the tiny random-weight checkpoint with EOS ignored, so every request
generates exactly --max-tokens tokens on both paths.

    .venv/bin/python bench/http_overhead.py --requests 32 --max-tokens 32 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import uvicorn

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.families.detect import family_from_config, read_model_config
from hunyuan_serve.languages import find_language
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine import VllmEngine
from hunyuan_serve.replica.engine_types import Sampling
from hunyuan_serve.replica.sampling import replica_sampling


def texts_for(round_no: int, path: str, n: int) -> list[str]:
    # Unique per round and path: neither the cache nor vLLM's prefix cache can favour one side.
    return [f"Round {round_no} {path} sentence {i}: the quick brown fox jumps." for i in range(n)]


async def direct(engine: VllmEngine, cfg: ServeConfig, texts: list[str], max_tokens: int) -> list[float]:
    family = family_from_config(cfg.engine.prompt_family, read_model_config(engine.model))
    d = replica_sampling(cfg.replica, family, engine.model_name)
    sampling = Sampling(d.temperature, d.top_p, d.top_k, d.repetition_penalty, max_tokens)
    en, zh = find_language("en"), find_language("zh")

    async def one(i: int, text: str) -> float:
        started = time.perf_counter()
        await engine.generate(build_prompt(family, en, zh, text), sampling, f"direct-{time.time_ns()}-{i}")
        return time.perf_counter() - started

    return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(texts))))


async def over_http(url: str, texts: list[str], max_tokens: int) -> list[float]:
    limits = httpx.Limits(max_connections=len(texts), max_keepalive_connections=len(texts))
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

        async def one(text: str) -> float:
            started = time.perf_counter()
            body = {"text": text, "source_lang": "en", "target_lang": "zh", "max_tokens": max_tokens}
            response = await client.post("/translate", json=body)
            response.raise_for_status()
            return time.perf_counter() - started

        return list(await asyncio.gather(*(one(t) for t in texts)))


async def run(args: argparse.Namespace, model: str, ignore_eos: bool) -> None:
    cfg = ServeConfig.model_validate(
        {
            "engine": {
                "model": model,
                "max_model_len": args.max_model_len,
                "enforce_eager": True,
                "kv_cache_memory_bytes": args.kv_cache_mib * 2**20,
                "max_num_seqs": max(args.requests, 8),
            },
            "replica": {"port": args.port, "cache_entries": 0, "max_in_flight": args.requests * 2},
        }
    )
    engine = VllmEngine(cfg.engine, model, ignore_eos=ignore_eos)
    started = time.perf_counter()
    await engine.start()
    print(f"engine started in {time.perf_counter() - started:.1f}s (model {model})", flush=True)
    family = family_from_config(cfg.engine.prompt_family, read_model_config(model))
    app = create_app(engine, cfg, family)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    url = f"http://127.0.0.1:{args.port}"
    async with httpx.AsyncClient(base_url=url) as client:
        while not server.started or (await client.get("/health")).status_code != 200:
            await asyncio.sleep(0.1)
    walls: dict[str, list[float]] = {"engine": [], "http": []}
    latencies: dict[str, list[float]] = {"engine": [], "http": []}
    for round_no in range(args.rounds + 1):  # round 0 warms both paths and is not counted
        for path in ("engine", "http"):
            texts = texts_for(round_no, path, args.requests)
            t0 = time.perf_counter()
            if path == "engine":
                lat = await direct(engine, cfg, texts, args.max_tokens)
            else:
                lat = await over_http(url, texts, args.max_tokens)
            wall = time.perf_counter() - t0
            if round_no:
                walls[path].append(wall)
                latencies[path].extend(lat)
            print(f"round {round_no} {path:6s} wall {wall:.3f}s", flush=True)
    server.should_exit = True
    await serving
    tokens = args.requests * args.max_tokens
    print()
    print(f"{args.requests} concurrent requests x {args.max_tokens} tokens, {args.rounds} rounds (median)")
    print(f"{'path':8s} {'wall s':>8s} {'tok/s':>8s} {'p50 ms':>8s} {'max ms':>8s}")
    for path in ("engine", "http"):
        wall = statistics.median(walls[path])
        lat = latencies[path]
        print(
            f"{path:8s} {wall:8.3f} {tokens / wall:8.0f} {statistics.median(lat) * 1000:8.1f} "
            f"{max(lat) * 1000:8.1f}"
        )
    ratio = statistics.median(walls["http"]) / statistics.median(walls["engine"])
    print(f"HTTP/engine wall-time ratio of medians: {ratio:.3f} (overhead {100 * (ratio - 1):+.1f}%)")
    # Each round's two paths ran back to back, so their ratio shares the machine's momentary load.
    paired = [h / e for h, e in zip(walls["http"], walls["engine"], strict=True)]
    print(f"per-round ratios: {' '.join(f'{r:.3f}' for r in paired)}; median {statistics.median(paired):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="Checkpoint directory (default: build the tiny random-weight one).")
    parser.add_argument("--requests", type=int, default=32, help="Concurrent requests per round.")
    parser.add_argument("--max-tokens", type=int, default=32, help="Tokens generated per request.")
    parser.add_argument("--rounds", type=int, default=3, help="Measured rounds (after one warm-up round).")
    parser.add_argument("--port", type=int, default=18999, help="Loopback port of the in-process replica.")
    parser.add_argument("--max-model-len", type=int, default=1024, help="Engine context length.")
    parser.add_argument("--kv-cache-mib", type=int, default=256, help="KV cache size in MiB.")
    args = parser.parse_args()
    if args.model:
        asyncio.run(run(args, args.model, ignore_eos=False))
        return
    from hunyuan_serve.families import HUNYUAN_MT
    from hunyuan_serve.tiny_model import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        # Named like its family: the replica detects a checkpoint's family from its name.
        model = str(build_tiny_model(Path(tmp) / f"tiny-{HUNYUAN_MT}"))
        asyncio.run(run(args, model, ignore_eos=True))


if __name__ == "__main__":
    main()

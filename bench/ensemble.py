"""Ensemble requests against single ones on one stack: req/s and p95 of each, in alternating rounds.

One `up` with two pools on CPU: `mt`, a tiny Hunyuan-MT whose ensembles go to `chimera`, a
tiny Hunyuan-MT-Chimera; one replica each, each on its own core. Each round sends the same number of
unique strings twice through Nginx, `concurrency` at once: plain /translate, then with
`"ensemble": {"candidates": N}` (N samples in one engine request, then the Chimera's fusion). EOS is
ignored on every replica (the tiny weights would stop at once), so every answer costs max_tokens.
`make bench` runs it (bench/run.py); alone: `python -m bench.ensemble [--rounds 3 --requests 48]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

if __package__ in (None, ""):  # `python bench/ensemble.py` as well as `python -m bench.ensemble`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.percentiles import nearest_rank
from bench.procs import REPO, Server, free_port, running, server_env

DATA = Path(__file__).resolve().parent / "data" / "sd-webui-zh_CN.json"
RESULTS = REPO / "bench" / "results"
IGNORE_EOS_ENV = "HUNYUAN_SERVE_TEST_IGNORE_EOS"  # the replicas' test knob (replica/command.py)
KV_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class Round:
    """One kind of request in one round: how many, how long, their latencies' p50/p95, what degraded."""

    kind: str  # "single" or "ensemble"
    requests: int
    wall_s: float
    p50_ms: float
    p95_ms: float
    failed: int
    degraded: int  # ensemble answers not fused (fused_by null)

    @property
    def per_s(self) -> float:
        return self.requests / self.wall_s if self.wall_s > 0 else 0.0


def strings(count: int, skip: int) -> list[str]:
    """`count` distinct UI strings of the bench's data after the first `skip` (no cache hit across rounds)."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    unique = list(dict.fromkeys(k for k in data if k.strip() and len(k) < 200))
    return unique[skip : skip + count]


async def _one(client: httpx.AsyncClient, body: dict[str, Any]) -> tuple[float, bool, bool]:
    t0 = time.perf_counter()
    try:
        response = await client.post("/translate", json=body)
        ok = response.status_code == 200
        fused = ok and response.json().get("fused_by") is not None
    except httpx.HTTPError:
        ok = fused = False
    return (time.perf_counter() - t0) * 1000, ok, fused


async def run_kind(base: str, kind: str, texts: list[str], concurrency: int, candidates: int) -> Round:
    """Every text once, at most `concurrency` in flight; wall time from the first send to the last answer."""
    gate = asyncio.Semaphore(concurrency)
    extra = {"ensemble": {"candidates": candidates}} if kind == "ensemble" else {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits, trust_env=False) as client:

        async def bounded(text: str) -> tuple[float, bool, bool]:
            async with gate:
                body = {"text": text, "source_lang": "en", "target_lang": "zh", **extra}
                return await _one(client, body)

        t0 = time.perf_counter()
        done = await asyncio.gather(*(bounded(t) for t in texts))
        wall = time.perf_counter() - t0
    latencies = [ms for ms, ok, _ in done if ok]
    degraded = sum(1 for _, ok, fused in done if ok and not fused) if kind == "ensemble" else 0
    return Round(
        kind,
        len(texts),
        round(wall, 3),
        round(nearest_rank(latencies, 0.5), 1),
        round(nearest_rank(latencies, 0.95), 1),
        sum(1 for _, ok, _ in done if not ok),
        degraded,
    )


def stack_config(work: Path, mt: Path, chimera: Path, port: int, max_tokens: int) -> dict[str, Any]:
    return {
        "base_port": free_port(),
        "run_dir": str(work / "run"),
        "engine": {"dtype": "float32", "enforce_eager": True, "kv_cache_memory_bytes": KV_BYTES},
        "replica": {"max_tokens": max_tokens},
        "pools": [
            {"name": "mt", "model": str(mt), "replicas": 1, "chimera_pool": "chimera"},
            {"name": "chimera", "model": str(chimera), "replicas": 1},
        ],
        "nginx": {"port": port, "read_timeout_s": 300.0},
        "supervisor": {"startup_timeout_s": 600.0},
    }


def measure(args: argparse.Namespace, work: Path) -> list[Round]:
    from hunyuan_serve.tiny_model import build_tiny_model

    mt = build_tiny_model(work / "tiny-hunyuan-mt")
    chimera = build_tiny_model(work / "tiny-chimera", kind="chimera")
    port = free_port()
    config = work / "up.yaml"
    config.write_text(yaml.safe_dump(stack_config(work, mt, chimera, port, args.max_tokens)))
    argv = [sys.executable, "-m", "hunyuan_serve", "up", "--config", str(config)]
    env = server_env({IGNORE_EOS_ENV: "1"})
    base = f"http://127.0.0.1:{port}"
    rounds: list[Round] = []
    with running(Server("stack with a Chimera pool", argv, work / "up.log", env)) as stack:
        stack.wait_http(f"{base}/health", args.start_timeout_s, ok=lambda d: d.get("status") == "ready")
        asyncio.run(run_kind(base, "ensemble", strings(8, 0), 8, args.candidates))  # warm-up, uncounted
        for n in range(args.rounds):
            texts = strings(2 * args.requests, 8 + n * 2 * args.requests)
            # Alternating which goes first, so neither always meets a machine the other just warmed.
            kinds = ("single", "ensemble") if n % 2 == 0 else ("ensemble", "single")
            for i, kind in enumerate(kinds):
                part = texts[i * args.requests : (i + 1) * args.requests]
                rounds.append(asyncio.run(run_kind(base, kind, part, args.concurrency, args.candidates)))
                print(f"[bench] ensemble round {n + 1} {kind}: {rounds[-1]}", flush=True)
    return rounds


def report(rounds: list[Round], args: argparse.Namespace) -> str:
    def med(kind: str, attr: str) -> float:
        values = [getattr(r, attr) for r in rounds if r.kind == kind]
        return statistics.median(values) if values else 0.0

    single_rps, ens_rps = med("single", "per_s"), med("ensemble", "per_s")
    single_p95, ens_p95 = med("single", "p95_ms"), med("ensemble", "p95_ms")
    lines = [
        "# Ensemble requests against single ones",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. One `up`, pools `mt` (tiny Hunyuan-MT, "
        f"core 0) and `chimera` (tiny Hunyuan-MT-Chimera, core 1), one replica each; {args.requests} unique "
        f"strings per kind and round, {args.concurrency} at once, en->zh, EOS ignored, max_tokens "
        f"{args.max_tokens}; ensembles of {args.candidates} candidates. Client on the same two cores.",
        "",
        "| kind | req/s (median) | p95 ms (median) | failed | degraded |",
        "|---|---|---|---|---|",
        f"| single | {single_rps:.1f} | {single_p95:.0f} | "
        f"{sum(r.failed for r in rounds if r.kind == 'single')} | - |",
        f"| ensemble | {ens_rps:.1f} | {ens_p95:.0f} | "
        f"{sum(r.failed for r in rounds if r.kind == 'ensemble')} | "
        f"{sum(r.degraded for r in rounds if r.kind == 'ensemble')} |",
        "",
        f"Ensemble / single: {ens_rps / single_rps if single_rps else 0:.2f}x the requests/s, "
        f"{ens_p95 / single_p95 if single_p95 else 0:.2f}x the p95.",
        "",
        "Rounds: " + "; ".join(f"{r.kind} {r.per_s:.1f} req/s p95 {r.p95_ms:.0f} ms" for r in rounds),
        "",
        f"Re-run: `python -m bench.ensemble --rounds {args.rounds} --requests {args.requests} "
        f"--concurrency {args.concurrency} --candidates {args.candidates}`.",
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=48, help="Requests per kind and round.")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--candidates", type=int, default=6, help="Candidates per ensemble (2-8).")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--start-timeout-s", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "report-ensemble.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hs-ensemble-") as tmp:
        rounds = measure(args, Path(tmp))
    text = report(rounds, args)
    args.out.write_text(text, encoding="utf-8")
    (args.out.with_suffix(".json")).write_text(json.dumps([asdict(r) for r in rounds], indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Interactive requests during a bulk job, and two keys' bulk jobs at once, on one stack.

One `up --replicas 2` on CPU with the tiny model, vLLM's priority scheduling (engine.scheduling_policy
priority, the default), a keys file of three keys: `page` (a person in the page: one string every
0.2 s, interactive by default), `ci-a` and `ci-b` (priority=bulk). The replicas' cache is off and EOS
ignored, so every text costs max_tokens. Three phases, each bounded in requests and seconds, run in
rounds, each round in another order (none always meets a machine another just warmed or a
neighbour's load alone), each figure over all rounds:
1. idle: `page` alone; p50/p95;
2. bulk alone: `ci-a`'s job, as the translate CLI sends it (as many batches of 16 in flight as it
   keeps against this stack; each batch distinct texts or another target), texts/s;
3. bulk with interactive: the same job while `page` sends again; both figures;
then two keys: `ci-a` and `ci-b` each run that job at once; each key's share of the texts/s. Beside
each phase, the replicas' bulk width (hunyuan_bulk_width, its narrowest) and the bulk waiting in them
(hunyuan_bulk_queued, its most), read from their /metrics twice a second.
Targets: interactive p50/p95 within 1.5x of idle, bulk at least 0.6x alone with a person, the job
alone never held back by the width (nobody active: full), each key at least 40%.
`make bench ARGS="--only fairness"` runs it; alone: `python -m bench.fairness [--seconds 20]`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import httpx
import yaml

if __package__ in (None, ""):  # `python bench/fairness.py` as well as `python -m bench.fairness`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ensemble import IGNORE_EOS_ENV, KV_BYTES, strings
from bench.fairness_report import Figures, Job, Width, latencies, merged, ratio, report
from bench.names import STACK_TARGETS
from bench.procs import REPO, Server, free_port, running, server_env
from hunyuan_serve.client.settings import ClientSettings
from hunyuan_serve.client.width import BULK_TEXTS_HEADER, parse_bulk_texts, requests_in_flight
from hunyuan_serve.config import ReplicaConfig

RESULTS = REPO / "bench" / "results"
KEYS = {
    "page": "bench-page-key-0123456789",
    "ci-a": "bench-ci-a-key-0123456789",
    "ci-b": "bench-ci-b-key-987654321",
}
PHASES = ("idle", "alone", "beside")
METRICS_EVERY_S = 0.5
_GAUGE = re.compile(r"^(hunyuan_bulk_width|hunyuan_bulk_queued)\s+([0-9.eE+-]+)\s*$", re.MULTILINE)


# -- the measuring (a real stack) ---------------------------------------------------------------


def _client(base: str, key: str, connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    headers = {"Authorization": f"Bearer {KEYS[key]}"}
    return httpx.AsyncClient(base_url=base, headers=headers, timeout=300, limits=limits, trust_env=False)


async def _interactive(
    base: str, texts: list[str], until: float, every_s: float = 0.0
) -> tuple[list[float], int]:
    """`page`'s strings one at a time, the next `every_s` after the last was sent (or when it is
    answered, if later), until they are done or the clock passes `until`."""
    samples: list[float] = []
    failed = 0
    async with _client(base, "page", 1) as client:
        for text in texts:
            if time.monotonic() >= until:
                break
            t0 = time.perf_counter()
            try:
                answer = await client.post(
                    "/translate", json={"text": text, "source_lang": "en", "target_lang": "zh"}
                )
                ok = answer.status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                samples.append((time.perf_counter() - t0) * 1000)
            else:
                failed += 1
            await asyncio.sleep(max(0.0, every_s - (time.perf_counter() - t0)))
    return samples, failed


async def _gauges(ports: Sequence[int], seen: dict[str, list[float]]) -> None:
    """The replicas' bulk width and queue, read from each one's /metrics every METRICS_EVERY_S."""
    async with httpx.AsyncClient(timeout=5, trust_env=False) as client:
        while True:
            for port in ports:
                try:
                    text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
                except httpx.HTTPError:
                    continue
                for name, value in _GAUGE.findall(text):
                    seen.setdefault(name, []).append(float(value))
            await asyncio.sleep(METRICS_EVERY_S)


async def _watched(ports: Sequence[int], widths: dict[str, Width], phase: str, work: Any) -> Any:
    """`work` awaited while the replicas' gauges are read; what they read lands in widths[phase]."""
    seen: dict[str, list[float]] = {}
    reader = asyncio.create_task(_gauges(ports, seen))
    try:
        return await work
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        narrow = min(seen.get("hunyuan_bulk_width", [0.0]))
        queued = max(seen.get("hunyuan_bulk_queued", [0.0]))
        old = widths.get(phase)
        if old is not None:
            narrow, queued = min(narrow, old.narrowest), max(queued, old.most_queued)
        widths[phase] = Width(int(narrow), int(queued))


async def _translate_width(base: str, batch: int) -> int:
    """The batches `translate` keeps in flight against this stack: sized from the X-Hunyuan-Bulk-Texts
    of an answer, as the client sizes it (client/width.py)."""
    async with _client(base, "ci-a", 1) as client:
        body = {"text": "Save", "source_lang": "en", "target_lang": "zh"}
        answer = await client.post("/translate", json=body)
    settings = ClientSettings(batch_size=batch)
    return requests_in_flight(settings, parse_bulk_texts(answer.headers.get(BULK_TEXTS_HEADER)))


def batch_bodies(texts: Sequence[str], batch: int) -> Iterator[dict[str, Any]]:
    """Bulk batches none of which repeats a prompt of another before texts x targets run out: each pass
    over the texts goes into the next target language. A repeated batch would measure the replica's
    coalescing of identical texts in flight (and vLLM's prefix cache), not the engine's work."""
    for target in itertools.cycle(STACK_TARGETS):
        for start in range(0, len(texts) - batch + 1, batch):
            yield {"texts": list(texts[start : start + batch]), "source_lang": "en", "target_lang": target}


async def _job(
    base: str, key: str, bodies: Iterator[dict[str, Any]], args: argparse.Namespace, until: float
) -> Job:
    """`key`'s bulk job: `concurrency` workers each sending the next batch of `bodies` (shared by every
    job of the run) until `until`; a 503 waits a little and sends the same batch again."""
    counts = {"texts": 0, "refused": 0, "failed": 0}

    async def worker(client: httpx.AsyncClient) -> None:
        body = next(bodies)
        while time.monotonic() < until:
            try:
                answer = await client.post("/translate", json=body, headers={"X-Priority": "bulk"})
                status = answer.status_code
            except httpx.HTTPError:
                status = 0
            if status == 503:  # refused: the same batch again after a pause
                counts["refused"] += 1
                await asyncio.sleep(args.refused_pause_s)
                continue
            if status == 200:
                counts["texts"] += len(body["texts"])
            else:
                counts["failed"] += 1
            body = next(bodies)  # answered or failed for good: the next batch

    t0 = time.monotonic()
    async with _client(base, key, args.concurrency) as client:
        await asyncio.gather(*(worker(client) for _ in range(args.concurrency)))
    return Job(key, counts["texts"], round(time.monotonic() - t0, 3), counts["refused"], counts["failed"])


async def _round(
    base: str, args: argparse.Namespace, job: Iterator[dict[str, Any]], people: list[str], n: int
) -> dict[str, Any]:
    """One round of the three phases, in the order of round n (rotated): what each measured."""
    order = PHASES[n % 3 :] + PHASES[: n % 3]
    out: dict[str, Any] = {}
    every = args.interactive_every_s
    for kind in order:
        if kind == "alone":  # the job alone: no person active, so the window of the last one passes first
            await asyncio.sleep(args.window_s)
        until = time.monotonic() + args.seconds
        mine = people[(2 * n + (kind == "beside")) * args.interactive :][: args.interactive]
        if kind == "idle":
            work: Any = _interactive(base, mine, until, every)
        elif kind == "alone":
            work = _job(base, "ci-a", job, args, until)
        else:
            work = asyncio.gather(
                _job(base, "ci-a", job, args, until), _interactive(base, mine, until, every)
            )
        out[kind] = await _watched(args.replica_ports, args.widths, kind, work)
    return out


async def _alternating(
    base: str, args: argparse.Namespace, job: Iterator[dict[str, Any]], people: list[str]
) -> Figures:
    """Rounds of the person alone, the job alone and both together, each round in another order;
    figures over all rounds."""
    alone: list[Job] = []
    beside: list[Job] = []
    idle: list[float] = []
    busy: list[float] = []
    failed = {"idle": 0, "busy": 0}
    for n in range(args.rounds):
        got = await _round(base, args, job, people, n)
        alone.append(got["alone"])
        done, (times, missed) = got["beside"]
        beside.append(done)
        busy += times
        failed["busy"] += missed
        idle += got["idle"][0]
        failed["idle"] += got["idle"][1]
        print(f"[bench] fairness round {n + 1}: alone {alone[-1].per_s:.1f} texts/s, with interactive "
              f"{beside[-1].per_s:.1f} texts/s", flush=True)  # fmt: skip
    ratios = tuple(round(ratio(b.per_s, a.per_s), 3) for a, b in zip(alone, beside, strict=True))
    return Figures(
        latencies(idle, failed["idle"]),
        merged(alone),
        latencies(busy, failed["busy"]),
        merged(beside),
        (alone[0], alone[0]),
        ratios,
    )


async def _phases(base: str, args: argparse.Namespace) -> Figures:
    # Distinct strings per phase: vLLM's prefix cache would make a string sent before cheaper.
    n = args.interactive * 2 * args.rounds
    texts = strings(10_000, 0)  # all the workload's distinct strings (about 5,000)
    people, warm = texts[:n], texts[n : n + 4]
    job = batch_bodies(texts[n + 4 :], args.batch)
    await _interactive(base, warm, time.monotonic() + args.seconds)  # warm-up, uncounted
    if args.concurrency is None:  # what `translate` itself would hold; the report says which
        args.concurrency = await _translate_width(base, args.batch)
        args.width_from = "as `translate` sizes it from the stack's X-Hunyuan-Bulk-Texts"
    start_load = os.getloadavg()[0]
    rounds = await _alternating(base, args, job, people)
    print(
        f"[bench] fairness idle {rounds.idle}, with the job {rounds.busy}; bulk {rounds.round_ratios}x alone"
    )
    until = time.monotonic() + args.seconds
    both = asyncio.gather(_job(base, "ci-a", job, args, until), _job(base, "ci-b", job, args, until))
    pair = await _watched(args.replica_ports, args.widths, "pair", both)
    print(f"[bench] fairness two keys: {pair[0].per_s:.1f} / {pair[1].per_s:.1f} texts/s", flush=True)
    load = (start_load, os.getloadavg()[0])
    return replace(rounds, pair=(pair[0], pair[1]), widths=dict(args.widths), load=load)


def stack_config(work: Path, model: Path, port: int, args: argparse.Namespace) -> dict[str, Any]:
    keys = work / "keys"
    keys.write_text(f"{KEYS['page']}\n{KEYS['ci-a']} priority=bulk\n{KEYS['ci-b']} priority=bulk\n")
    keys.chmod(0o600)  # `up` refuses a keys file others may read
    args.replica_ports = [free_port()]
    args.replica_ports.append(args.replica_ports[0] + 1)
    return {
        "replicas": 2,
        "base_port": args.replica_ports[0],
        "run_dir": str(work / "run"),
        "engine": {
            "model": str(model),
            "dtype": "float32",
            "enforce_eager": True,
            "kv_cache_memory_bytes": KV_BYTES,
            "scheduling_policy": "priority",
            **({"max_num_seqs": args.max_num_seqs} if args.max_num_seqs else {}),
        },
        "replica": {
            "max_tokens": args.max_tokens,
            "cache_entries": 0,
            **({"interactive_window_s": 0} if args.width_off else {}),
        },
        "auth": {"keys_file": str(keys)},
        "nginx": {"port": port, "read_timeout_s": 300.0},
        "supervisor": {"startup_timeout_s": 600.0},
    }


def measure(args: argparse.Namespace, work: Path) -> Figures:
    from hunyuan_serve.tiny_model import build_tiny_model

    model = build_tiny_model(work / "tiny-hunyuan-mt")
    port = free_port()
    config = work / "up.yaml"
    config.write_text(yaml.safe_dump(stack_config(work, model, port, args)))
    argv = [sys.executable, "-m", "hunyuan_serve", "up", "--config", str(config)]
    base = f"http://127.0.0.1:{port}"
    log = work / "up.log"
    server = Server("stack, two replicas", argv, log, server_env({IGNORE_EOS_ENV: "1"}))
    try:
        with running(server) as stack:
            stack.wait_http(f"{base}/health", args.start_timeout_s, ok=lambda d: d.get("status") == "ready")
            return asyncio.run(_phases(base, args))
    except RuntimeError:  # the work dir goes with this process: say what `up` said first
        print("".join(log.read_text(errors="replace").splitlines(True)[-30:]), file=sys.stderr)
        raise


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="Longest window of each phase.")
    parser.add_argument("--interactive", type=int, default=40, help="Most one-string requests per phase.")
    parser.add_argument(
        "--concurrency",
        type=int,
        help="Bulk batches in flight per key (default: as many as `translate` keeps against this stack).",
    )
    parser.add_argument("--batch", type=int, default=16, help="Texts per bulk batch.")
    parser.add_argument(
        "--interactive-every-s", type=float, default=0.2, help="A person's pace: one string this often."
    )
    parser.add_argument("--rounds", type=int, default=2, help="Rounds of bulk alone / with interactive.")
    parser.add_argument(
        "--max-num-seqs", type=int, help="The replicas' engine.max_num_seqs (default: the engine's default)."
    )
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument(
        "--width-off",
        action="store_true",
        help="replica.interactive_window_s 0: the bulk width always full, as before the replicas had one.",
    )
    parser.add_argument("--refused-pause-s", type=float, default=0.2, help="A refused batch's wait.")
    parser.add_argument("--start-timeout-s", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "report-fairness.md")
    args = parser.parse_args(argv)
    args.width_from = "--concurrency"  # the report's word for where the width came from
    args.widths = {}  # per phase, the replicas' bulk width as their /metrics said (_watched)
    # How long a person counts as active: the job alone starts once the last one's window has passed.
    args.window_s = 0.0 if args.width_off else ReplicaConfig().interactive_window_s + 0.5
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hs-fairness-") as tmp:
        figures = measure(args, Path(tmp))
    text = report(figures, args)
    args.out.write_text(text, encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(asdict(figures), indent=1), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Interactive requests during a bulk job, and two keys' bulk jobs at once, on one stack.

One `up --replicas 2` on CPU with the tiny model, vLLM's priority scheduling (engine.scheduling_policy
priority, the default), a keys file of three keys: `page` (a person in the page: one string at a time,
interactive by default), `ci-a` and `ci-b` (priority=bulk). The replicas' cache is off and EOS ignored,
so every text costs max_tokens. Phases, each bounded in requests and seconds:
1. idle: `page` sends one string at a time; p50/p95;
2. bulk alone: `ci-a`'s job, as the translate CLI sends it (as many batches of 16 in flight as it
   keeps against this stack; each batch distinct texts or another target), texts/s;
3. bulk with interactive: the same job while `page` sends one at a time again; both figures;
4. two keys: `ci-a` and `ci-b` each run that job at once; each key's share of the texts/s.
Targets: interactive p50/p95 within 1.5x of idle, bulk at least 0.9x alone, each key at least 40%.
`make bench ARGS="--only fairness"` runs it; alone: `python -m bench.fairness [--seconds 20]`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import yaml

if __package__ in (None, ""):  # `python bench/fairness.py` as well as `python -m bench.fairness`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ensemble import IGNORE_EOS_ENV, KV_BYTES, percentile, strings
from bench.names import STACK_TARGETS
from bench.procs import REPO, Server, free_port, running, server_env
from hunyuan_serve.client.settings import ClientSettings
from hunyuan_serve.client.width import BULK_TEXTS_HEADER, parse_bulk_texts, requests_in_flight

RESULTS = REPO / "bench" / "results"
KEYS = {
    "page": "bench-page-key-0123456789",
    "ci-a": "bench-ci-a-key-0123456789",
    "ci-b": "bench-ci-b-key-987654321",
}
# What the priority classes must reach: (figure, bound, whether it must be at most (True) or at least it).
LATENCY_RATIO_MAX = 1.5
BULK_RATIO_MIN = 0.9
KEY_SHARE_MIN = 0.4


@dataclass(frozen=True)
class Latencies:
    """One-at-a-time requests of `page`: how many were answered, their p50/p95, how many failed."""

    answered: int
    p50_ms: float
    p95_ms: float
    failed: int


@dataclass(frozen=True)
class Job:
    """One key's bulk job over a window: texts answered, the window, batches refused (503) or failed."""

    key: str
    texts: int
    wall_s: float
    refused: int
    failed: int

    @property
    def per_s(self) -> float:
        return self.texts / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class Figures:
    idle: Latencies
    alone: Job
    busy: Latencies  # `page` during the bulk job
    beside: Job  # the bulk job while `page` sent
    pair: tuple[Job, Job]  # the two keys at once
    round_ratios: tuple[float, ...] = ()  # each round's bulk texts/s with interactive / alone


def latencies(samples: Sequence[float], failed: int) -> Latencies:
    return Latencies(
        len(samples), round(percentile(list(samples), 50), 1), round(percentile(list(samples), 95), 1), failed
    )


def merged(jobs: Sequence[Job]) -> Job:
    """Several windows of one key's job as one: their texts, seconds and refusals added."""
    return Job(
        jobs[0].key,
        sum(j.texts for j in jobs),
        round(sum(j.wall_s for j in jobs), 3),
        sum(j.refused for j in jobs),
        sum(j.failed for j in jobs),
    )


def ratio(value: float, base: float) -> float:
    """value / base, 0 when there is no base (a phase that answered nothing)."""
    return value / base if base > 0 else 0.0


def shares(jobs: Sequence[Job]) -> list[float]:
    """Each job's share of the texts all of them answered (0 each when none answered)."""
    total = sum(j.texts for j in jobs)
    return [ratio(j.texts, total) for j in jobs]


def verdicts(f: Figures) -> list[tuple[str, float, str, bool]]:
    """(what, measured, target, met) for each target of the issue."""
    p50, p95 = ratio(f.busy.p50_ms, f.idle.p50_ms), ratio(f.busy.p95_ms, f.idle.p95_ms)
    bulk = ratio(f.beside.per_s, f.alone.per_s)
    rows = [
        ("interactive p50, during the job / idle", p50, f"<= {LATENCY_RATIO_MAX}x", p50 <= LATENCY_RATIO_MAX),
        ("interactive p95, during the job / idle", p95, f"<= {LATENCY_RATIO_MAX}x", p95 <= LATENCY_RATIO_MAX),
        ("bulk texts/s, with interactive / alone", bulk, f">= {BULK_RATIO_MIN}x", bulk >= BULK_RATIO_MIN),
    ]
    for job, share in zip(f.pair, shares(f.pair), strict=True):
        rows.append(
            (
                f"{job.key}'s share of two keys' texts/s",
                share,
                f">= {KEY_SHARE_MIN:.0%}",
                share >= KEY_SHARE_MIN,
            )
        )
    return rows


def report(f: Figures, args: argparse.Namespace) -> str:
    """The Markdown report: the setup, every phase's figures, and each target met or not."""
    a, b = f.pair
    lines = [
        "# Interactive and bulk work on one stack",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. `up --replicas 2` (CPU, tiny model, "
        "engine.scheduling_policy priority, cache off, EOS ignored, max_tokens "
        f"{args.max_tokens}); a bulk job is {args.concurrency} batches of {args.batch} texts in flight "
        f"({args.width_from}), X-Priority: bulk; each window {args.seconds:g} s at most, "
        f"interactive requests one at a time, at most {args.interactive} idle and as many over the "
        f"{args.rounds} rounds of the job alone and with interactive work (alternating which goes first); "
        f"engine.max_num_seqs {args.max_num_seqs or 'default (256)'}. Client on the same two cores.",
        "",
        "| phase | interactive p50 ms | p95 ms | answered | failed | bulk texts/s | refused batches |",
        "|---|---|---|---|---|---|---|",
        f"| idle | {f.idle.p50_ms:.0f} | {f.idle.p95_ms:.0f} | {f.idle.answered} | {f.idle.failed} | - | - |",
        f"| bulk alone | - | - | - | - | {f.alone.per_s:.1f} | {f.alone.refused} |",
        f"| bulk + interactive | {f.busy.p50_ms:.0f} | {f.busy.p95_ms:.0f} | {f.busy.answered} | "
        f"{f.busy.failed} | {f.beside.per_s:.1f} | {f.beside.refused} |",
        f"| two keys: {a.key} / {b.key} | - | - | - | - | {a.per_s:.1f} / {b.per_s:.1f} | "
        f"{a.refused} / {b.refused} |",
        "",
        "| target | measured | goal | met |",
        "|---|---|---|---|",
    ]
    for what, value, goal, met in verdicts(f):
        shown = f"{value:.0%}" if goal.endswith("%") else f"{value:.2f}x"
        lines.append(f"| {what} | {shown} | {goal} | {'yes' if met else 'NO'} |")
    failed = f.alone.failed + f.beside.failed + a.failed + b.failed
    lines += [
        "",
        "Each round's bulk with interactive / alone: " + ", ".join(f"{r:.2f}x" for r in f.round_ratios) + ".",
        f"Bulk batches failed (not 200, not 503): {failed}.",
        "",
        f"Re-run: `python -m bench.fairness --seconds {args.seconds:g} --interactive {args.interactive} "
        f"--concurrency {args.concurrency} --batch {args.batch} --rounds {args.rounds}"
        + (f" --max-num-seqs {args.max_num_seqs}" if args.max_num_seqs else "")
        + "`.",
    ]
    return "\n".join(lines) + "\n"


# -- the measuring (a real stack) ---------------------------------------------------------------


def _client(base: str, key: str, connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    headers = {"Authorization": f"Bearer {KEYS[key]}"}
    return httpx.AsyncClient(base_url=base, headers=headers, timeout=300, limits=limits, trust_env=False)


async def _interactive(base: str, texts: list[str], until: float) -> tuple[list[float], int]:
    """`page`'s strings one at a time until they are done or the clock passes `until`."""
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
    return samples, failed


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


async def _alternating(
    base: str, args: argparse.Namespace, job: Iterator[dict[str, Any]], people: list[str]
) -> Figures:
    """Rounds of the job alone and the job with `page` beside it, in alternating order (neither always
    meets a machine the other just warmed, or a neighbour's load alone); figures over all rounds."""
    alone: list[Job] = []
    beside: list[Job] = []
    samples: list[float] = []
    failed = 0
    share = max(1, len(people) // args.rounds)
    for n in range(args.rounds):
        for kind in ("alone", "beside") if n % 2 == 0 else ("beside", "alone"):
            until = time.monotonic() + args.seconds
            if kind == "alone":
                alone.append(await _job(base, "ci-a", job, args, until))
                continue
            mine = people[n * share : (n + 1) * share]
            done, (times, missed) = await asyncio.gather(
                _job(base, "ci-a", job, args, until), _interactive(base, mine, until)
            )
            beside.append(done)
            samples += times
            failed += missed
        print(f"[bench] fairness round {n + 1}: alone {alone[-1].per_s:.1f} texts/s, with interactive "
              f"{beside[-1].per_s:.1f} texts/s", flush=True)  # fmt: skip
    ratios = tuple(round(ratio(b.per_s, a.per_s), 3) for a, b in zip(alone, beside, strict=True))
    idle = Latencies(0, 0.0, 0.0, 0)
    return Figures(
        idle, merged(alone), latencies(samples, failed), merged(beside), (alone[0], alone[0]), ratios
    )


async def _phases(base: str, args: argparse.Namespace) -> Figures:
    # Distinct strings per phase: vLLM's prefix cache would make a string sent before cheaper.
    n = args.interactive
    texts = strings(10_000, 0)  # all the workload's distinct strings (about 5,000)
    idle_texts, busy_texts, warm = texts[:n], texts[n : 2 * n], texts[2 * n : 2 * n + 4]
    job = batch_bodies(texts[2 * n + 4 :], args.batch)
    await _interactive(base, warm, time.monotonic() + args.seconds)  # warm-up, uncounted
    if args.concurrency is None:  # what `translate` itself would hold; the report says which
        args.concurrency = await _translate_width(base, args.batch)
        args.width_from = "as `translate` sizes it from the stack's X-Hunyuan-Bulk-Texts"
    idle = latencies(*await _interactive(base, idle_texts, time.monotonic() + args.seconds))
    print(f"[bench] fairness idle: {idle}", flush=True)
    rounds = await _alternating(base, args, job, busy_texts)
    print(f"[bench] fairness with interactive: {rounds.busy}; bulk {rounds.round_ratios}x alone", flush=True)
    until = time.monotonic() + args.seconds
    pair = await asyncio.gather(_job(base, "ci-a", job, args, until), _job(base, "ci-b", job, args, until))
    print(f"[bench] fairness two keys: {pair[0].per_s:.1f} / {pair[1].per_s:.1f} texts/s", flush=True)
    return replace(rounds, idle=idle, pair=(pair[0], pair[1]))


def stack_config(work: Path, model: Path, port: int, args: argparse.Namespace) -> dict[str, Any]:
    keys = work / "keys"
    keys.write_text(f"{KEYS['page']}\n{KEYS['ci-a']} priority=bulk\n{KEYS['ci-b']} priority=bulk\n")
    keys.chmod(0o600)  # `up` refuses a keys file others may read
    return {
        "replicas": 2,
        "base_port": free_port(),
        "run_dir": str(work / "run"),
        "engine": {
            "model": str(model),
            "dtype": "float32",
            "enforce_eager": True,
            "kv_cache_memory_bytes": KV_BYTES,
            "scheduling_policy": "priority",
            **({"max_num_seqs": args.max_num_seqs} if args.max_num_seqs else {}),
        },
        "replica": {"max_tokens": args.max_tokens, "cache_entries": 0},
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
    parser.add_argument("--rounds", type=int, default=2, help="Rounds of bulk alone / with interactive.")
    parser.add_argument(
        "--max-num-seqs", type=int, help="The replicas' engine.max_num_seqs (default: the engine's default)."
    )
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--refused-pause-s", type=float, default=0.2, help="A refused batch's wait.")
    parser.add_argument("--start-timeout-s", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "report-fairness.md")
    args = parser.parse_args(argv)
    args.width_from = "--concurrency"  # the report's word for where the width came from
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

"""A burst sent all at once, as a user's script sends it, against the stack and vLLM's own server.

Two clients, each sending K strings at once and waiting for all: the seeds' script (one httpx client,
asyncio.gather, no retries) and the official `openai` client with its defaults (two retries, which
honour Retry-After). Both sides run on the same tiny model and the same cores, one after the other: `up
--replicas 2` and one `vllm serve`; each string costs max_tokens (EOS ignored on both). For each side,
client and K: answered, refused (any other status), p50 / p95 / max latency, wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from bench import targets
from bench.burst_kill import Killed, describe, kill_when_holding
from bench.burst_person import PeopleFirst, measure_person, person_lines
from bench.burst_send import Burst, bodies, openai_burst, script, served, summarize
from bench.fairness_stack import KEYS, Stack, start_stack
from bench.procs import Server, free_port, running

RESULTS = Path(__file__).resolve().parent / "results"
CLIENTS = ("script", "openai")
SIDES = ("stack", "vllm")


def measure_side(side: str, url: str, key: str, args: argparse.Namespace) -> list[Burst]:
    """Every client and K against one side, one burst at a time."""
    model = served(url, key)
    found = []
    for k in args.k:
        for client in CLIENTS:
            body = bodies(model, args.max_tokens, side == "vllm", f"{client}-{k}")
            run = script if client == "script" else openai_burst
            start = time.monotonic()
            outcomes = asyncio.run(run(url, body, k, key))
            burst = summarize(side, client, outcomes, time.monotonic() - start)
            print(
                f"[bench] burst {side} {client} K={k}: {burst.statuses} in {burst.wall_s:.1f} s", flush=True
            )
            found.append(burst)
    return found


def measure_kill(stack: Stack, args: argparse.Namespace) -> tuple[Burst, Killed | None]:
    """The script's burst of --kill-k while one of the two replicas gets kill -9 (bench/burst_kill.py)."""
    k = args.kill_k
    body = bodies(served(stack.base, KEYS["page"]), args.max_tokens, False, f"kill-{k}")

    async def burst_and_kill() -> tuple[Killed | None, list[tuple[str, float]], float]:
        start = time.monotonic()
        burst = asyncio.ensure_future(script(stack.base, body, k, KEYS["page"]))
        killed = await kill_when_holding(stack.logs.parent, k, burst)
        return killed, await burst, time.monotonic() - start

    killed, outcomes, wall_s = asyncio.run(burst_and_kill())
    burst = summarize("stack", "script, kill -9", outcomes, wall_s)
    print(f"[bench] burst kill K={k}: {burst.statuses} in {wall_s:.1f} s; {describe(killed, k)}", flush=True)
    return burst, killed


def measure(args: argparse.Namespace, work: Path) -> tuple[list[Burst], PeopleFirst | None, Killed | None]:
    """The stack (its kill step last), then vLLM's server (the stack stopped first: both use every
    core)."""
    from hunyuan_serve.tiny_model import build_tiny_model

    model = build_tiny_model(work / "tiny-hunyuan-mt")
    stack_args = argparse.Namespace(
        width_off=False, max_num_seqs=None, max_tokens=args.max_tokens, start_timeout_s=args.start_timeout_s
    )
    with contextlib.ExitStack() as started:
        stack = start_stack(started, work / "stack", model, stack_args, False)
        found = measure_side("stack", stack.base, KEYS["page"], args)
        person = measure_person(stack.base, args) if args.person else None
        killed = None
        if args.kill_k:
            burst, killed = measure_kill(stack, args)
            found.append(burst)
    if not args.vllm:
        return found, person, killed
    hw = targets.detect_hardware("cpu")
    port = free_port()
    vllm = Server(
        "vllm-openai", targets.vllm_argv(model, hw, port), work / "vllm.log", targets.baseline_env(hw)
    )
    with running(vllm):
        url = f"http://127.0.0.1:{port}"
        vllm.wait_http(f"{url}/v1/models", args.start_timeout_s)
        found += measure_side("vllm", url, "unused", args)
    return found, person, killed


def report(
    bursts: Sequence[Burst], args: argparse.Namespace, person: PeopleFirst | None = None, kill: str = ""
) -> str:
    lines = [
        "# A burst at once: the stack against vLLM's own server",
        "",
        f"Two CPU replicas (`up --replicas 2`) and one `vllm serve` of the tiny model on the same cores, "
        f"{args.max_tokens} tokens an answer, distinct strings; K requests sent at once, then awaited.",
        "",
    ]
    for k in args.k:
        ratio = _ratio(bursts, k)
        lines.append(f"- K = {k}: stack wall time / vLLM's, the script: {ratio}")
    lines += [
        "",
        "| side | client | K | 200 | refused | failed | p50 s | p95 s | max s | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in bursts:
        row = f"| {b.side} | {b.client} | {b.k} | {b.answered} | {b.refused} | {b.failed} |"
        lines.append(f"{row} {b.p50_s:.2f} | {b.p95_s:.2f} | {b.max_s:.2f} | {b.wall_s:.1f} |")
    if person is not None:
        lines += ["", *person_lines(person)]
    if kill:
        lines += ["", f"{kill} The row `script, kill -9` is that burst's outcome."]
    return "\n".join(lines) + "\n"


def _ratio(bursts: Sequence[Burst], k: int) -> str:
    walls = {b.side: b.wall_s for b in bursts if b.k == k and b.client == "script"}
    if "stack" not in walls or not walls.get("vllm"):
        return "n/a"
    return f"{walls['stack'] / walls['vllm']:.2f}x"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[600, 2000], help="Burst sizes.")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--start-timeout-s", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "report-burst.md")
    parser.add_argument(
        "--no-person", dest="person", action="store_false", help="Leave out the people-first figure."
    )
    parser.add_argument(
        "--person-rounds", type=int, default=3, help="Rounds of the people-first figure (its median)."
    )
    parser.add_argument(
        "--bulk-nice",
        type=int,
        default=0,
        help="Each round of the people-first figure again with the bulk script's thread at this nice "
        "value; 0: only at the stack's own. Where the kernel groups CPU time by session (autogroup), "
        "it orders the script against the bench's own person only: the replicas and Nginx run in "
        "sessions of their own.",
    )
    parser.add_argument(
        "--kill-k",
        type=int,
        default=2000,
        help="A last burst of this many at once while one of the two replicas gets kill -9; 0: none.",
    )
    parser.add_argument(
        "--no-vllm", dest="vllm", action="store_false", help="The stack alone (no vLLM server side)."
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hs-burst-") as tmp:
        bursts, person, killed = measure(args, Path(tmp))
    text = report(bursts, args, person, describe(killed, args.kill_k) if args.kill_k else "")
    args.out.write_text(text, encoding="utf-8")
    figures = [asdict(b) for b in bursts] + ([{"person": asdict(person)}] if person else [])
    figures += [{"kill": asdict(killed)}] if killed else []
    args.out.with_suffix(".json").write_text(json.dumps(figures, indent=1), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

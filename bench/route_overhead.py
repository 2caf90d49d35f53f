"""What routing by model costs at the edge: the same stub replica behind a plain proxy_pass (one pool) and
behind njs reading the body's model (two pools), request after request, small bodies and ~1 MiB ones.

Rounds alternate the two setups, so a noisy machine hits both alike. Prints per-request medians and p95s;
the difference of the medians is what njs adds.

    flock /tmp/hs-heavy.lock .venv/bin/python -m bench.route_overhead --requests 300 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.pool_stubs import Stub, pooled_edge, pools_config, stub_servers
from bench.procs import free_port
from hunyuan_serve.config import build_config

POOLS = [{"name": "mt", "model": "mt-7b"}, {"name": "small", "model": "mt-small"}]


def body_of(size: int) -> bytes:
    """A chat request naming the stub's model, about size bytes long (the same body to both setups)."""
    return json.dumps({"model": "mt-small", "messages": [{"role": "user", "content": "x" * size}]}).encode()


async def timed(http: httpx.AsyncClient, body: bytes, requests: int) -> list[float]:
    out = []
    headers = {"content-type": "application/json"}
    for _ in range(requests):
        start = time.perf_counter()
        answer = await http.post("/v1/chat/completions", content=body, headers=headers)
        out.append((time.perf_counter() - start) * 1000)
        assert answer.status_code == 200, answer.text[:200]
    return out


async def measure(requests: int, rounds: int, size: int) -> dict[str, list[float]]:
    """Per setup, every request's milliseconds over all rounds."""
    times: dict[str, list[float]] = {"plain": [], "routed": []}
    body = body_of(size)
    limit = {"nginx.client_max_body_size": "2m"}
    with tempfile.TemporaryDirectory() as tmp, stub_servers([Stub("small", "mt-small")]) as stubs:
        plain_port, routed_port = free_port(), free_port()
        single = build_config({"nginx": {"port": plain_port, "worker_processes": 1}}, limit)
        plain_stub = [Stub("default", "mt-small", port=stubs[0].port)]
        # The two-pool edge: pool mt has no replica (its upstream is down), small the stub.
        two = pools_config(routed_port, POOLS, limit)
        async with (
            pooled_edge(Path(tmp) / "plain", single, plain_stub),
            pooled_edge(Path(tmp) / "routed", two, stubs),
        ):
            for _ in range(rounds):
                for name, port in (("plain", plain_port), ("routed", routed_port)):
                    async with httpx.AsyncClient(
                        base_url=f"http://127.0.0.1:{port}", trust_env=False
                    ) as http:
                        await timed(http, body, 20)  # warm: connections, Nginx's workers
                        times[name] += await timed(http, body, requests)
    return times


def report(label: str, times: dict[str, list[float]]) -> None:
    medians = {k: statistics.median(v) for k, v in times.items()}
    for name, values in times.items():
        p95 = statistics.quantiles(values, n=20)[-1]
        print(f"{label:>10} {name:>7}: median {medians[name]:.3f} ms, p95 {p95:.3f} ms, n={len(values)}")
    print(f"{label:>10}   njs adds {medians['routed'] - medians['plain']:+.3f} ms per request (medians)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for label, size in (("small", 200), ("1 MiB", (1 << 20) - 4096)):
        report(label, asyncio.run(measure(args.requests, args.rounds, size)))


if __name__ == "__main__":
    main()

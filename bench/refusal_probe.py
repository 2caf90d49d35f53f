"""A light client beside k6 that times the edge's refusals: one request at a time, each on a new connection.

Under the overload question k6 runs thousands of VUs on the cores the stack uses. Its refusal times,
and Nginx's log of them, read 300-700 ms p99 there where this probe saw under 12 ms; with k6 and Nginx
on a core apart from the replicas, Nginx's log read 10 ms p99 and k6 1.2 s. This probe sends one
request every `interval_s` from its own process, at its own priority, and times a request's connect,
then its last byte sent to the answer's first byte read: the edge's time, not the load generator's.
Run beside any load:

    python -m bench.refusal_probe --url http://127.0.0.1:8080 --seconds 60 --out probe.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bench.k6run import launcher

# What the probe asks: short, so that an accepted one costs the stack little.
BODY = {"text": "Probe the edge", "source_lang": "en", "target_lang": "zh", "max_tokens": 8}
# The probe's nice value: ahead of k6 and the replicas, as a client on another machine would be (below 0
# needs root; `nice` runs it at its own where it may not).
NICE = -10


@dataclass(frozen=True)
class Sample:
    """One probe: when (time.time()), the answer's status ("" for none), connect and answer times."""

    at: float
    status: str
    connect_ms: float
    first_byte_ms: float


def request_bytes(host: str, path: str) -> bytes:
    body = json.dumps(BODY).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


def probe_once(host: str, port: int, request: bytes, timeout_s: float) -> Sample:
    """One request on a new connection: connect time, then last byte sent to first byte read."""
    at, start = time.time(), time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            connected = time.monotonic()
            sock.sendall(request)
            sent = time.monotonic()
            first = sock.recv(64)
            answered = time.monotonic()
    except OSError:
        return Sample(at, "", 0.0, 0.0)
    parts = first.split(b" ", 2)
    status = parts[1].decode("ascii", "replace") if len(parts) > 1 else ""
    return Sample(at, status, (connected - start) * 1e3, (answered - sent) * 1e3)


def run(url: str, seconds: float, interval_s: float, out: Path, timeout_s: float) -> None:
    """Probes until `seconds` have passed, one JSON line a sample in `out`."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    request = request_bytes(parts.netloc, parts.path.rstrip("/") + "/translate")
    until = time.monotonic() + seconds
    with out.open("w", encoding="utf-8") as lines:
        while time.monotonic() < until:
            lines.write(json.dumps(asdict(probe_once(host, port, request, timeout_s))) + "\n")
            lines.flush()
            time.sleep(interval_s)


def read_samples(path: Path) -> list[Sample]:
    if not path.is_file():
        return []
    return [Sample(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line]


def refused_ms(samples: list[Sample]) -> list[float]:
    """The refusals' times as their client saw them: connecting, then the answer's first byte after the
    request's last."""
    return [s.connect_ms + s.first_byte_ms for s in samples if s.status == "503"]


@contextlib.contextmanager
def probing(
    url: str, out: Path, seconds: float, interval_s: float = 0.05, cores: Sequence[int] = ()
) -> Iterator[Path]:
    """The probe in its own process, at NICE, while the block runs (stopped when it ends, or after
    `seconds`); on `cores` where given (the load generator's: a client's, not the stack's); yields the
    file its samples are in."""
    argv = [*launcher(NICE, cores), sys.executable, "-m", "bench.refusal_probe", "--url", url]
    argv += ["--seconds", str(seconds), "--interval-s", str(interval_s), "--out", str(out)]
    proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    try:
        yield out
    finally:
        proc.terminate()
        proc.wait(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", required=True, help="The edge's base URL (its /translate is probed).")
    parser.add_argument("--seconds", type=float, required=True, help="How long to probe.")
    parser.add_argument("--interval-s", type=float, default=0.05, help="Pause after each probe.")
    parser.add_argument("--timeout-s", type=float, default=120.0, help="Deadline of one probe.")
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, one a sample.")
    args = parser.parse_args(argv)
    run(args.url, args.seconds, args.interval_s, args.out, args.timeout_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

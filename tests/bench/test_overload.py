"""The overload script with the real k6 against a scripted server: a JSON 503 with Retry-After is a
refusal with its own latency, a 200 an accepted answer, anything else a failure; the report's row; and
the refusal probe beside k6 against the same server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bench import names, refusal_probe
from bench.k6run import run_k6
from bench.procs import free_port
from bench.session import Bench, Plan, base_env
from bench.write_report import overload_headline, overload_section
from hunyuan_serve.families import SamplingDefaults
from tests.support.scripted_http import send_json, serving

SAMPLING = SamplingDefaults(temperature=0.3, top_p=0.9, top_k=7, repetition_penalty=1.2)
PLAN = Plan(max_tokens=11, p95_ms=4321.0, fail_rate=0.002)


class Edge(ThreadingHTTPServer):
    """Answers by arrival: every 4th a 200; every 10th a bare 502; every 7th a 503 with no Retry-After
    (not a proper refusal); the rest the stack's JSON 503 with Retry-After."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.count = 0
        self.sent: list[str] = []


class _Handler(BaseHTTPRequestHandler):
    server: Edge

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            self.server.count += 1
            n = self.server.count
            kind = "ok" if n % 4 == 0 else "502" if n % 10 == 0 else "bare503" if n % 7 == 0 else "refused"
            self.server.sent.append(kind)
        status = {"ok": 200, "502": 502}.get(kind, 503)
        body = {"result": "译文"} if kind == "ok" else {"error": {"code": "unavailable", "message": "x"}}
        send_json(self, status, body, {"Retry-After": "2"} if kind == "refused" else None)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def edge() -> Iterator[Edge]:
    with serving(Edge()) as server:
        yield server


def test_refusals_accepted_and_failures_are_told_apart(edge: Edge, tmp_path: Path) -> None:
    data = tmp_path / "items.json"
    data.write_text(json.dumps({f"string {i}": "x" for i in range(50)}), encoding="utf-8")
    url = f"http://127.0.0.1:{edge.server_address[1]}"
    env = {**base_env(PLAN, SAMPLING), "BASE_URL": url, "DATA": str(data), "RATE": "40", "DURATION": "2s"}
    result = run_k6("overload.js", "overload", tmp_path / "k6", {**env, "VUS": "20"})
    sent = {kind: edge.sent.count(kind) for kind in ("ok", "502", "bare503", "refused")}
    assert result.requests == len(edge.sent) and sent["refused"] > 0 and sent["ok"] > 0
    assert result.value("refused", "passes") == sent["refused"]
    assert result.value("refused_latency", "count") == sent["refused"]
    assert result.value("accepted_latency", "count") == sent["ok"]
    assert result.failed == sent["502"] + sent["bare503"]
    assert result.returncode == 99  # failures crossed the failure-rate threshold; latency has none

    b = Bench(PLAN, tmp_path, tmp_path, data, "k6", SAMPLING)
    b.overload = {
        "capacity_rps": 4.0,
        "capacity_p95_ms": 900.0,
        "edge_cap": 32,
        "vus": 20,
        "nginx_refused_50_ms": 0.25,
        "nginx_refused_95_ms": 3.0,
        "nginx_refused_99_ms": 12.0,
        "probe_refusals": 9,
        "probe_refused_50_ms": 0.5,
        "probe_refused_95_ms": 1.5,
        "probe_refused_99_ms": 4.0,
        "nginx_mb_before": 10.0,
        "nginx_mb_after": 11.0,
    }
    b.add(names.OVERLOAD, names.OVERLOADED, result, offered=40)
    table = "\n".join(overload_section(b))
    goodput = sent["ok"] / result.duration_s
    row = f"| 40 | 4 | 32 | 20 | {result.requests} | {sent['ok']} | {goodput:.1f} | {sent['refused']} |"
    assert row in table
    assert "| 0.2 / 3.0 / 12.0 | 0.5 / 1.5 / 4.0 |" in table and "| 10 → 11 |" in table
    assert "each of its\n9 503s timed" in table
    headline = overload_headline(b)[0]
    assert "10x the measured 4" in headline and "12 ms in Nginx's log, 4 ms by the probe" in headline


def test_the_probe_times_each_answer_and_keeps_the_refusals(edge: Edge, tmp_path: Path) -> None:
    out = tmp_path / "probe.jsonl"
    refusal_probe.run(f"http://127.0.0.1:{edge.server_address[1]}", 1.0, 0.01, out, timeout_s=10)
    samples = refusal_probe.read_samples(out)
    statuses = [s.status for s in samples]
    expected = [{"ok": "200", "502": "502"}.get(kind, "503") for kind in edge.sent]
    assert len(samples) >= 10 and statuses == expected
    assert all(s.first_byte_ms > 0 and s.connect_ms > 0 for s in samples)
    refused = [s.connect_ms + s.first_byte_ms for s in samples if s.status == "503"]
    assert refusal_probe.refused_ms(samples) == refused and len(refused) == statuses.count("503")


def test_probing_runs_the_probe_beside_a_block_and_stops_with_it(edge: Edge, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{edge.server_address[1]}"
    with refusal_probe.probing(url, tmp_path / "probe.jsonl", seconds=60, interval_s=0.01) as out:
        deadline = time.monotonic() + 30
        while len(edge.sent) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
    sent = len(edge.sent)
    time.sleep(0.3)
    assert sent >= 5 and len(edge.sent) <= sent + 1  # stopped with the block, not after its 60 s
    assert [s.status for s in refusal_probe.read_samples(out)][:5] == ["503", "503", "503", "200", "503"]


def test_a_probe_with_nothing_listening_records_no_status(tmp_path: Path) -> None:
    port = free_port()
    sample = refusal_probe.probe_once("127.0.0.1", port, refusal_probe.request_bytes("x", "/translate"), 1.0)
    assert sample.status == "" and sample.first_byte_ms == 0.0

"""The real k6 binary runs the bench's scripts against a scripted HTTP server; run_k6 reads the figures."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bench.k6run import find_k6, read_samples, run_k6


class ScriptedTranslator(ThreadingHTTPServer):
    """Answers POST /translate 200 with `cached` set on repeats, and 502 for every `fail_every`-th request."""

    def __init__(self, fail_every: int = 0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fail_every = fail_every
        self.bodies: list[dict[str, object]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedTranslator

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            seen = any(b.get("text") == body.get("text") for b in self.server.bodies)
            self.server.bodies.append(body)
            n = len(self.server.bodies)
        fail = self.server.fail_every and n % self.server.fail_every == 0
        status, answer = (502, {"error": "scripted"}) if fail else (200, {"result": "译文", "cached": seen})
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def translator(request: pytest.FixtureRequest) -> Iterator[ScriptedTranslator]:
    server = ScriptedTranslator(getattr(request, "param", 0))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def data_file(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "items.json"
    path.write_text(json.dumps({f"string {i}": f"字符串 {i}" for i in range(count)}), encoding="utf-8")
    return path


def test_k6_is_installed() -> None:
    assert Path(find_k6()).is_file()


@pytest.mark.parametrize("translator", [5], indirect=True)
def test_a_pass_sends_each_string_once_in_order_and_counts_failures(
    translator: ScriptedTranslator, tmp_path: Path
) -> None:
    env = {"BASE_URL": translator.url, "DATA": str(data_file(tmp_path, 50)), "ITERATIONS": "20", "VUS": "1"}
    env["OFFSET"] = "7"
    result = run_k6("pass.js", "pass", tmp_path / "k6", env)
    assert [b["text"] for b in translator.bodies] == [f"string {i}" for i in range(7, 27)]
    assert {(b["source_lang"], b["target_lang"], b["max_tokens"]) for b in translator.bodies} == {
        ("en", "zh", 32)
    }
    assert (result.requests, result.failed) == (20, 4)  # every 5th answer was a 502
    assert result.failure_rate == pytest.approx(0.2)
    assert result.returncode == 99  # the failure-rate threshold was crossed: a finding, not a crash
    samples = read_samples(result.samples_path)
    assert len(samples) == 20 and sum(1 for *_, ok in samples if not ok) == 4


def test_a_second_pass_is_counted_as_cached(translator: ScriptedTranslator, tmp_path: Path) -> None:
    env = {"BASE_URL": translator.url, "DATA": str(data_file(tmp_path, 30)), "ITERATIONS": "10", "VUS": "2"}
    first = run_k6("pass.js", "first", tmp_path / "k6", env)
    second = run_k6("pass.js", "second", tmp_path / "k6", env)
    assert (first.cached_rate, second.cached_rate) == (0.0, 1.0)
    assert first.returncode == second.returncode == 0


@pytest.mark.parametrize("script", ["rate.js", "chaos.js"])
def test_the_open_loop_offers_the_rate_asked_for(
    script: str, translator: ScriptedTranslator, tmp_path: Path
) -> None:
    env = {"BASE_URL": translator.url, "DATA": str(data_file(tmp_path, 100)), "RATE": "20", "DURATION": "2s"}
    result = run_k6(script, script, tmp_path / "k6", env)
    assert 36 <= result.requests <= 41 and result.failed == 0 and result.dropped == 0
    assert result.duration_s == pytest.approx(2.0, abs=1.0)


def test_past_the_last_string_the_next_pass_goes_on_in_the_next_language(
    translator: ScriptedTranslator, tmp_path: Path
) -> None:
    data = tmp_path / "items.json"
    data.write_text(json.dumps({"a": "甲", "": "", "b": "乙", "  ": "", "c": "丙"}), encoding="utf-8")
    env = {"BASE_URL": translator.url, "DATA": str(data), "ITERATIONS": "5", "VUS": "1"}
    run_k6("pass.js", "laps", tmp_path / "k6", {**env, "OFFSET": "2", "TARGET_LANGS": "zh,ja"})
    sent = [(b["text"], b["target_lang"]) for b in translator.bodies]
    # Blank strings are never sent: positions 2..6 over the 3 left, each pass in the next language.
    assert sent == [("c", "zh"), ("a", "ja"), ("b", "ja"), ("c", "ja"), ("a", "zh")]

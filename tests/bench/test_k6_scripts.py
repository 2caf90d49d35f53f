"""The real k6 binary runs the bench's scripts against a scripted HTTP server; run_k6 reads the figures."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bench.k6run import K6_DIR, find_k6, read_samples, run_k6
from bench.session import Plan, base_env
from hunyuan_serve.families import SamplingDefaults
from tests.support.scripted_http import send_json, serving

# Unlike any family's defaults, so that a body carrying them came from the environment.
SAMPLING = SamplingDefaults(temperature=0.3, top_p=0.9, top_k=7, repetition_penalty=1.2)
PLAN = Plan(max_tokens=11, p95_ms=4321.0, fail_rate=0.002)


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
        send_json(self, status, answer)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def translator(request: pytest.FixtureRequest) -> Iterator[ScriptedTranslator]:
    with serving(ScriptedTranslator(getattr(request, "param", 0))) as server:
        yield server


def data_file(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "items.json"
    path.write_text(json.dumps({f"string {i}": f"字符串 {i}" for i in range(count)}), encoding="utf-8")
    return path


def k6_env(url: str, data: Path, **extra: str) -> dict[str, str]:
    """What bench/session.py passes every script, plus the scenario's own settings."""
    return {**base_env(PLAN, SAMPLING), "BASE_URL": url, "DATA": str(data), **extra}


def inspect(script: str, env: dict[str, str]) -> dict[str, Any]:
    """The options k6 resolves for a script (`k6 inspect`: the init code runs, no request is sent)."""
    cmd = [find_k6(), "inspect"]
    for key, value in env.items():
        cmd += ["-e", f"{key}={value}"]
    out = subprocess.run([*cmd, str(K6_DIR / script)], capture_output=True, text=True, check=True, timeout=60)
    options: dict[str, Any] = json.loads(out.stdout)
    return options


def test_k6_is_installed() -> None:
    assert Path(find_k6()).is_file()


@pytest.mark.parametrize("translator", [5], indirect=True)
def test_a_pass_sends_each_string_once_in_order_and_counts_failures(
    translator: ScriptedTranslator, tmp_path: Path
) -> None:
    env = k6_env(translator.url, data_file(tmp_path, 50), ITERATIONS="20", VUS="1", OFFSET="7")
    result = run_k6("pass.js", "pass", tmp_path / "k6", env)
    assert [b["text"] for b in translator.bodies] == [f"string {i}" for i in range(7, 27)]
    assert {(b["source_lang"], b["target_lang"]) for b in translator.bodies} == {("en", "zh")}
    assert (result.requests, result.failed) == (20, 4)  # every 5th answer was a 502
    assert result.failure_rate == pytest.approx(0.2)
    assert result.returncode == 99  # the failure-rate threshold was crossed: a finding, not a crash
    samples = read_samples(result.samples_path)
    assert len(samples) == 20 and sum(1 for *_, ok in samples if not ok) == 4


def test_every_request_sends_the_sampling_and_thresholds_the_python_side_passed(
    translator: ScriptedTranslator, tmp_path: Path
) -> None:
    data = data_file(tmp_path, 5)
    run_k6("pass.js", "sampling", tmp_path / "k6", k6_env(translator.url, data, ITERATIONS="3", VUS="1"))
    fields = ("temperature", "top_p", "top_k", "repetition_penalty", "max_tokens")
    sent = {tuple(b[f] for f in fields) for b in translator.bodies}
    assert sent == {(0.3, 0.9, 7, 1.2, 11)}
    thresholds = inspect("pass.js", k6_env(translator.url, data))["thresholds"]
    assert thresholds == {"http_req_duration": ["p(95)<4321"], "failed_requests": ["rate<0.002"]}


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("SAMPLING", None, "SAMPLING is not set"),
        ("SAMPLING", "", "SAMPLING is not set"),
        ("SAMPLING", "0.7", "SAMPLING must be a JSON object with max_tokens"),
        ("SAMPLING", "{temperature", "SAMPLING is not JSON"),
        ("SAMPLING", '{"temperature": 0.7}', "SAMPLING must be a JSON object with max_tokens"),
        ("P95_MS", None, "P95_MS is not set"),
        ("FAIL_RATE", None, "FAIL_RATE is not set"),
    ],
)
def test_a_script_without_the_settings_it_needs_stops_before_sending_anything(
    key: str, value: str | None, message: str, translator: ScriptedTranslator, tmp_path: Path
) -> None:
    env = k6_env(translator.url, data_file(tmp_path, 5), ITERATIONS="3", VUS="1")
    if value is None:
        del env[key]
    else:
        env[key] = value
    with pytest.raises(RuntimeError, match=message):
        run_k6("pass.js", "missing", tmp_path / "k6", env)
    assert translator.bodies == []


def test_a_second_pass_is_counted_as_cached(translator: ScriptedTranslator, tmp_path: Path) -> None:
    env = k6_env(translator.url, data_file(tmp_path, 30), ITERATIONS="10", VUS="2")
    first = run_k6("pass.js", "first", tmp_path / "k6", env)
    second = run_k6("pass.js", "second", tmp_path / "k6", env)
    assert (first.cached_rate, second.cached_rate) == (0.0, 1.0)
    assert first.returncode == second.returncode == 0


@pytest.mark.parametrize(("script", "scenario"), [("rate.js", "open_loop"), ("chaos.js", "chaos")])
def test_the_open_loop_is_a_constant_arrival_rate_of_the_rate_asked_for(
    script: str, scenario: str, tmp_path: Path
) -> None:
    env = k6_env("http://127.0.0.1:9", data_file(tmp_path, 5), RATE="20", DURATION="2s", VUS="50")
    options = inspect(script, env)["scenarios"]
    assert options == {
        scenario: {
            **options[scenario],
            "executor": "constant-arrival-rate",
            "rate": 20,
            "timeUnit": "1s",
            "duration": "2s",
            "preAllocatedVUs": 40,  # twice the rate, within VUS
            "maxVUs": 50,
        }
    }


def test_the_overload_starts_every_vu_the_bench_sized_before_the_run(tmp_path: Path) -> None:
    env = k6_env("http://127.0.0.1:9", data_file(tmp_path, 5), RATE="748", DURATION="2s")
    options = inspect("overload.js", {**env, "VUS": "438", "PRE_VUS": "438"})["scenarios"]["overload"]
    assert (options["rate"], options["preAllocatedVUs"], options["maxVUs"]) == (748, 438, 438)
    # Never more started than VUS allows.
    options = inspect("overload.js", {**env, "VUS": "100", "PRE_VUS": "438"})["scenarios"]["overload"]
    assert (options["preAllocatedVUs"], options["maxVUs"]) == (100, 100)


@pytest.mark.parametrize("script", ["rate.js", "chaos.js"])
def test_the_open_loop_sends_consecutive_strings_from_the_offset_each_once(
    script: str, translator: ScriptedTranslator, tmp_path: Path
) -> None:
    env = k6_env(translator.url, data_file(tmp_path, 100), RATE="20", DURATION="1s", OFFSET="5")
    result = run_k6(script, script, tmp_path / "k6", env)
    sent = sorted(int(str(b["text"]).split()[1]) for b in translator.bodies)
    # However many iterations the machine's speed let start, they are positions OFFSET, OFFSET+1, ...
    assert sent and sent == list(range(5, 5 + len(sent)))
    assert result.requests == len(sent) and result.failed == 0


def test_the_ramp_climbs_to_vus_then_holds(tmp_path: Path) -> None:
    env = k6_env("http://127.0.0.1:9", data_file(tmp_path, 5), VUS="7", RAMP="3s", HOLD="2s")
    ramp = inspect("ramp.js", env)["scenarios"]["ramp"]
    assert (ramp["executor"], ramp["startVUs"]) == ("ramping-vus", 1)
    assert [(s["duration"], s["target"]) for s in ramp["stages"]] == [("3s", 7), ("2s", 7)]


def test_past_the_last_string_the_next_pass_goes_on_in_the_next_language(
    translator: ScriptedTranslator, tmp_path: Path
) -> None:
    data = tmp_path / "items.json"
    data.write_text(json.dumps({"a": "甲", "": "", "b": "乙", "  ": "", "c": "丙"}), encoding="utf-8")
    env = k6_env(translator.url, data, ITERATIONS="5", VUS="1", OFFSET="2", TARGET_LANGS="zh,ja")
    run_k6("pass.js", "laps", tmp_path / "k6", env)
    sent = [(b["text"], b["target_lang"]) for b in translator.bodies]
    # Blank strings are never sent: positions 2..6 over the 3 left, each pass in the next language.
    assert sent == [("c", "zh"), ("a", "ja"), ("b", "ja"), ("c", "ja"), ("a", "zh")]

"""One real replica process (vLLM engine, tiny Hunyuan checkpoint) over HTTP, started once per module."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from hunyuan_serve.cache.entry import decode_answer
from tests.support.bodies import check, raw_bytes
from tests.support.stacks import cli, free_port, started, stop, wait_until

pytestmark = pytest.mark.engine

MAX_IN_FLIGHT = 40
MAX_QUEUED = 8  # past max_in_flight, these wait: only past both is a request refused
ADMITTED = MAX_IN_FLIGHT + MAX_QUEUED
STALL_TIMEOUT_S = 3
STARTUP_TIMEOUT_S = 400


@dataclass
class Replica:
    proc: subprocess.Popen[bytes]
    url: str
    port: int
    log: Path
    cache: Path
    first_health: tuple[int, dict[str, Any]]

    def metric(self, name: str) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.MULTILINE)
        return float(match.group(1)) if match else 0.0

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith('{"request_id"'):
                lines.append(json.loads(line))
        return lines


@pytest.fixture(scope="module")
def replica(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replica]:
    work = tmp_path_factory.mktemp("replica")
    port = free_port()
    log = work / "replica.log"
    cache = work / "cache.sqlite"
    argv = cli(
        "replica",
        "--model", str(tiny_model_dir), "--port", str(port),
        "--max-model-len", "1024", "--kv-cache-memory-bytes", str(128 * 2**20), "--enforce-eager", "true",
        "--max-num-seqs", "64", "--max-in-flight", str(MAX_IN_FLIGHT), "--cache-path", str(cache),
        "--max-queued", str(MAX_QUEUED),
        "--graceful-shutdown-s", "60", "--stall-timeout-s", str(STALL_TIMEOUT_S),
    )  # fmt: skip
    # Test-only: random weights emit EOS at once; ignoring it lets requests run as long as max_tokens says.
    env = {**os.environ, "HUNYUAN_SERVE_TEST_IGNORE_EOS": "1"}
    url = f"http://127.0.0.1:{port}"
    first: list[tuple[int, dict[str, Any]]] = []  # the first /health answer, given while loading

    def ready() -> bool:
        try:
            response = httpx.get(f"{url}/health", timeout=5)
        except httpx.TransportError:
            return False
        if not first:
            first.append((response.status_code, response.json()))
        return response.status_code == 200

    with started(argv, log=log, ready=ready, timeout_s=STARTUP_TIMEOUT_S, env=env) as proc:
        yield Replica(proc, url, port, log, cache, first[0])


def post(replica: Replica, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
    return httpx.post(f"{replica.url}/translate", json=body, timeout=kwargs.pop("timeout", 120), **kwargs)


def post_many(replica: Replica, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    # One shared client: a client per thread would stagger the requests by its own setup time.
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
    with (
        httpx.Client(base_url=replica.url, timeout=300, limits=limits) as client,
        concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool,
    ):
        return list(pool.map(lambda body: client.post("/translate", json=body), bodies))


def test_health_was_503_while_loading_and_is_200_once_warm(replica: Replica) -> None:
    status, body = replica.first_health
    assert status == 503
    assert body["status"] in ("loading", "warming") and body["reason"]
    ready = httpx.get(f"{replica.url}/health", timeout=10)
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    deep = httpx.get(f"{replica.url}/health", params={"deep": "1"}, timeout=30)
    assert deep.status_code == 200 and deep.json()["deep"] is True


def test_the_pausing_scheduler_acknowledges_the_steps_of_a_bulk_job(replica: Replica) -> None:
    before = replica.metric("hunyuan_people_first_acks")
    texts = [f"bulk line {i}" for i in range(6)]  # more than one text: the bulk class
    job = post(replica, {"texts": texts, "src_lang": "en", "tgt_lang": "de", "max_tokens": 12, "top_k": 3})
    assert job.status_code == 200, job.text
    # Each of the job's steps went through the pausing scheduler, which read the width for it.
    assert replica.metric("hunyuan_people_first_acks") >= before + 12
    assert replica.metric("hunyuan_people_first_inactive") == 0
    deep = httpx.get(f"{replica.url}/health", params={"deep": "1"}, timeout=30).json()
    assert deep["people_first"] == "active" and "reason" not in deep


def test_round_trip_and_its_json_log_line(replica: Replica) -> None:
    body = {"text": "Hello, world.", "source_lang": "en", "target_lang": "zh", "max_tokens": 8}
    response = post(replica, body, headers={"X-Request-ID": "round-trip-1"})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert isinstance(answer["result"], str) and answer["result"]
    assert (answer["source_lang"], answer["target_lang"], answer["cached"]) == ("en", "zh", False)
    assert answer["request_id"] == "round-trip-1" and answer["latency_ms"] > 0
    # The access line is written once the answer has gone: wait for it rather than for a while.
    assert _wait_for(lambda: any(line["request_id"] == "round-trip-1" for line in replica.log_lines()), 10)
    [line] = [line for line in replica.log_lines() if line["request_id"] == "round-trip-1"]
    assert line["status"] == 200 and line["source_lang"] == "en" and line["target_lang"] == "zh"
    assert line["input_tokens"] > 5 and line["output_tokens"] == 8
    assert line["engine_ms"] > 0 and line["queue_ms"] >= 0 and line["cached"] is False


def test_batch_results_come_back_in_order(replica: Replica) -> None:
    texts = ["Open file", "今天天气很好", "Guten Morgen", "Привет, мир"]
    # top_k=1 sampling is greedy too, but a different cache key than temperature 0.
    singles = [
        post(replica, {"text": t, "source_lang": "en", "target_lang": "fr", "max_tokens": 6, "top_k": 1})
        for t in texts
    ]
    batch = post(
        replica, {"texts": texts, "src_lang": "en", "tgt_lang": "fr", "max_tokens": 6, "temperature": 0}
    )
    assert batch.status_code == 200, batch.text
    assert batch.json()["results"] == [s.json()["result"] for s in singles]
    assert batch.json()["cached"] == [False] * 4


def test_32_concurrent_requests_all_answered_and_batched(replica: Replica) -> None:
    bodies = [
        {"text": f"sentence number {i}", "source_lang": "en", "target_lang": "ja", "max_tokens": 32}
        for i in range(32)
    ]
    responses = post_many(replica, bodies)
    assert [r.status_code for r in responses] == [200] * 32
    assert all(isinstance(r.json()["result"], str) for r in responses)
    # The scheduler's own count: more than one sequence decoded in the same step.
    assert replica.metric("hunyuan_engine_max_running") > 1


def test_identical_request_is_a_cache_hit_and_lands_in_the_shared_file(replica: Replica) -> None:
    body = {"text": "cache this", "source_lang": "en", "target_lang": "de", "max_tokens": 8}
    hits = replica.metric('hunyuan_cache_hits_total{layer="memory"}')
    first, second = post(replica, body).json(), post(replica, body).json()
    assert (first["cached"], second["cached"]) == (False, True)
    assert second["result"] == first["result"]
    assert replica.metric('hunyuan_cache_hits_total{layer="memory"}') == hits + 1

    def in_the_file() -> bool:  # written on the cache's own thread, not before the answer
        with sqlite3.connect(replica.cache) as db:
            answers = [decode_answer(row[0]) for row in db.execute("SELECT value FROM translations")]
        return first["result"] in [answer.text for answer in answers if answer is not None]

    assert _wait_for(in_the_file, 10)


def test_metrics_counters_move(replica: Replica) -> None:
    ok = replica.metric('hunyuan_requests_total{status="200"}')
    bad = replica.metric('hunyuan_requests_total{status="422"}')
    prompt = replica.metric("hunyuan_prompt_tokens_total")
    generated = replica.metric("hunyuan_generation_tokens_total")
    count = replica.metric("hunyuan_request_latency_seconds_count")
    post(replica, {"text": "metrics", "source_lang": "en", "target_lang": "ko", "max_tokens": 5})
    post(replica, {"text": " ", "source_lang": "en", "target_lang": "ko"})
    assert replica.metric('hunyuan_requests_total{status="200"}') == ok + 1
    assert replica.metric('hunyuan_requests_total{status="422"}') == bad + 1
    assert replica.metric("hunyuan_prompt_tokens_total") > prompt
    assert replica.metric("hunyuan_generation_tokens_total") == generated + 5
    assert replica.metric("hunyuan_request_latency_seconds_count") == count + 2
    assert "hunyuan_requests_in_flight 0.0" in httpx.get(f"{replica.url}/metrics").text


def _wait_for(condition: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def _accepts(port: int) -> bool:
    """Whether anything listens on the port (a draining server has closed its listener)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _engine_core(replica: Replica) -> Any:
    import psutil

    for child in psutil.Process(replica.proc.pid).children():
        if "EngineCore" in " ".join(child.cmdline()):
            return child
    raise AssertionError("the replica has no EngineCore process")


@contextlib.contextmanager
def _engine_stopped(replica: Replica) -> Iterator[None]:
    """The engine-core process SIGSTOPped for the block: requests it holds stay in flight."""
    core = _engine_core(replica)
    core.suspend()
    try:
        yield
    finally:
        core.resume()


def test_client_disconnect_aborts_the_engine_request(replica: Replica) -> None:
    aborts = replica.metric("hunyuan_engine_aborts_total")
    # 900 tokens, within the budget of max_model_len 1024.
    body = json.dumps({"text": "long", "source_lang": "en", "target_lang": "fr", "max_tokens": 900}).encode()
    head = f"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}"
    # The core is stopped before the request goes in, so it cannot finish before the client goes away:
    # with its core forked, the tiny engine decodes 900 tokens in under 2 s, and a test that waited
    # to see the request running before stopping the core lost the race now and then.
    with _engine_stopped(replica):
        sock = socket.create_connection(("127.0.0.1", replica.port))
        sock.sendall(head.encode() + b"\r\n\r\n" + body)
        assert _wait_for(lambda: replica.metric("hunyuan_engine_unfinished") == 1, 30)
        sock.close()
        assert _wait_for(lambda: replica.metric("hunyuan_engine_unfinished") == 0, 10)
    assert _wait_for(lambda: replica.metric("hunyuan_engine_running") == 0, 10)
    assert replica.metric("hunyuan_engine_aborts_total") == aborts + 1
    assert _wait_for(lambda: any(line["status"] == 499 for line in replica.log_lines()), 5)


def test_past_the_in_flight_limit_and_queue_503_with_retry_after_while_the_engine_holds_the_rest(
    replica: Replica,
) -> None:
    rejected = replica.metric('hunyuan_rejections_total{reason="overload"}')
    # Few tokens each: the stopped core holds them in flight whatever their length, and once it moves
    # again all 48 are decoded in one batch (100 tokens each took 20 of this test's 21 s).
    bodies = [
        {"text": f"flood {i}", "source_lang": "zh", "target_lang": "en", "max_tokens": 8}
        for i in range(ADMITTED)
    ]
    extra = {"text": "one more", "source_lang": "zh", "target_lang": "en", "max_tokens": 5}
    # With the engine core stopped, all of them stay in flight until the test has seen the limit,
    # however fast this machine decodes.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with _engine_stopped(replica):
            admitted = pool.submit(post_many, replica, bodies)
            assert _wait_for(lambda: replica.metric("hunyuan_requests_in_flight") == ADMITTED, 60)
            refused = [post(replica, extra, timeout=10) for _ in range(3)]
            # Refused without waiting for the engine: it is stopped, and the admitted ones are still held.
            assert not admitted.done()
        answered = admitted.result(timeout=600)
    assert [r.status_code for r in refused] == [503] * 3
    assert all(r.json()["error"]["code"] == "overloaded" and r.headers["retry-after"] == "1" for r in refused)
    assert [r.status_code for r in answered] == [200] * ADMITTED
    assert replica.metric('hunyuan_rejections_total{reason="overload"}') == rejected + 3
    assert post(replica, extra).status_code == 200


def test_health_says_hung_while_the_engine_holds_work_without_stepping(replica: Replica) -> None:
    # SIGSTOP on the engine core: HTTP still answers and the engine still looks alive; only its steps stop.
    health = f"{replica.url}/health"
    # The core is stopped before the request goes in, so any length is still unfinished when health looks;
    # what it costs is the decoding after the core moves again (900 tokens: most of this test's time).
    body = {"text": "frozen", "source_lang": "en", "target_lang": "de", "max_tokens": 32}
    # Idle, a check resets the stall watch: its clock then starts at the first check that sees the work.
    assert httpx.get(health, timeout=10).status_code == 200
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # Stopped before the request is sent, the core cannot finish it before the test looks.
        with _engine_stopped(replica):
            pending = pool.submit(post, replica, body)
            assert _wait_for(lambda: replica.metric("hunyuan_engine_unfinished") == 1, 30)
            # Not yet, however late this check comes: the first to see the work starts the stall clock.
            assert httpx.get(health, timeout=10).status_code == 200
            assert _wait_for(lambda: httpx.get(health, timeout=10).status_code == 503, STALL_TIMEOUT_S + 10)
            hung = httpx.get(health, timeout=10).json()
        response = pending.result(timeout=120)
    assert hung["status"] == "hung" and "took no step" in hung["reason"] and "1 request(s)" in hung["reason"]
    assert response.status_code == 200, response.text
    assert _wait_for(lambda: httpx.get(health, timeout=10).status_code == 200, 10)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=raw_bytes)
def test_no_malformed_body_gets_a_5xx_from_the_real_engine(replica: Replica, body: bytes) -> None:
    check(httpx.post(f"{replica.url}/translate", content=body, timeout=60))


def test_sigterm_finishes_in_flight_then_exits_0(replica: Replica) -> None:
    # The engine core is stopped while the request goes in and the SIGTERM arrives: on a fast machine
    # even 900 tokens finished before a poll could see them in flight, and the test proved nothing.
    body = {"text": "last words", "source_lang": "en", "target_lang": "fr", "max_tokens": 32}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with _engine_stopped(replica):
            pending = pool.submit(post, replica, body)
            assert _wait_for(lambda: replica.metric("hunyuan_engine_unfinished") == 1, 30)
            replica.proc.send_signal(signal.SIGTERM)
            # Draining before the engine moves again: it has closed its listener, and waits for the request.
            assert _wait_for(lambda: not _accepts(replica.port), 30)
            assert replica.proc.poll() is None and not pending.done()
        response = pending.result(timeout=120)
    assert response.status_code == 200, response.text
    assert len(response.json()["result"]) > 0
    assert replica.proc.wait(90) == 0


def _has_engine_child(parent: Any) -> bool:
    import psutil

    for child in parent.children():
        try:
            if "EngineCore" in " ".join(child.cmdline()):
                return True
        except psutil.Error:
            continue
    return False


def test_sigterm_while_loading_exits_without_orphans(tiny_model_dir: Path, tmp_path: Path) -> None:
    import psutil

    port = free_port()
    argv = cli(
        "replica", "--model", str(tiny_model_dir), "--port", str(port),
        "--max-model-len", "1024", "--kv-cache-memory-bytes", str(128 * 2**20), "--enforce-eager", "true",
    )  # fmt: skip
    log = tmp_path / "replica.log"
    with started(argv, log=log) as proc:
        parent = psutil.Process(proc.pid)
        # Wait until the engine's own processes exist: the case that used to leave orphans behind.
        wait_until(proc, log, lambda: _has_engine_child(parent), 300, "the engine's processes started")
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()["status"] == "loading"
        # SIGTERM; fails if it takes more than a minute or any of the replica's processes outlives it.
        assert stop(proc) == 0

"""The cache shared across hosts for real: two `up` stacks (a host each) on the tiny model, one Redis."""

from __future__ import annotations

import contextlib
import re
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.support.redis_server import RedisServer, redis_server
from tests.support.stacks import free_ports, http_ok, started, tiny_up, wait_until

pytestmark = [pytest.mark.engine, pytest.mark.nginx]

READY_TIMEOUT_S = 600.0  # two engines starting at once on two shared cores, first compile included
CLIENTS = 3  # steady, bounded load: this many requests in flight at a time
PHASE_REQUESTS = 12  # answers in each phase (Redis up, killed, back) before the next begins
BODY = {"source_lang": "en", "target_lang": "zh"}


@dataclass
class Host:
    name: str
    url: str  # its Nginx, as clients reach it
    replica: str  # its one replica, whose /metrics counts what it did
    run: Path


@dataclass
class Hosts:
    a: Host
    b: Host
    redis: RedisServer


@pytest.fixture(scope="module")
def hosts(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    """Both stacks start at once (one engine start's wait, not two), each told the same Redis URL."""
    work = tmp_path_factory.mktemp("cache-hosts")
    with redis_server(work) as redis, contextlib.ExitStack() as stack:
        made = []
        for name in ("a", "b"):
            port, base = free_ports(2)
            cmd = tiny_up(tiny_model_dir, work / f"run-{name}", port, base, max_tokens=8)
            # A short retry: the test's phases last seconds, and Redis is asked again soon after it is back.
            cmd += ["--cache-redis-url", redis.url, "--cache-redis-retry-s", "0.2"]
            log = work / f"up-{name}.log"
            proc = stack.enter_context(started(cmd, log=log))
            host = Host(name, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{base}", work / f"run-{name}")
            made.append((host, proc, log))
        for host, proc, log in made:
            wait_until(proc, log, http_ok(host.url + "/health"), READY_TIMEOUT_S, f"stack {host.name} ready")
        yield Hosts(made[0][0], made[1][0], redis)


def _metric(host: Host, name: str, **labels: str) -> float:
    """One sample of the host's replica /metrics (0 when the series does not exist yet)."""
    text = httpx.get(host.replica + "/metrics", timeout=10, trust_env=False).text
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = re.escape(name + (f"{{{want}}}" if want else "")) + r" (\S+)$"
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def _wait_metric(host: Host, value: float, name: str, **labels: str) -> None:
    deadline = time.monotonic() + 60
    while _metric(host, name, **labels) != value:
        assert time.monotonic() < deadline, f"{name} {labels} never became {value}"
        time.sleep(0.05)


def _translate(host: Host, text: str) -> httpx.Response:
    return httpx.post(host.url + "/translate", json={**BODY, "text": text}, timeout=120, trust_env=False)


def _stored(redis: RedisServer, count: int) -> None:
    """Wait for the writes (queued, not awaited by the request) to reach Redis."""
    deadline = time.monotonic() + 30
    while int(redis.command("DBSIZE")) < count:
        assert time.monotonic() < deadline, f"Redis holds {redis.command('DBSIZE')} keys, not {count}"
        time.sleep(0.05)


def _asked_key(redis: RedisServer, send: Callable[[], httpx.Response]) -> tuple[httpx.Response, str]:
    """send()'s answer, and the one key Redis was asked for (MGET) meanwhile, read from its slow log (set
    to log every command). Only the replica answering send() reads Redis then: the other's load is over."""
    import redis as redis_client

    with redis_client.Redis(port=redis.port, decode_responses=True, socket_timeout=5) as client:
        client.config_set("slowlog-log-slower-than", 0)
        client.slowlog_reset()
        answer = send()
        assert answer.status_code == 200, answer.text
        logged = [bytes(e["command"]).decode() for e in client.slowlog_get(1000)]
    # The translation memory's refresh (replica.memory_refresh_s) reads its version keys in the
    # background; only the cache's lookups count here.
    asked = [c.split() for c in logged if c.startswith("MGET ") and ":memory:" not in c.split()[1]]
    assert [len(args) for args in asked] == [2], asked  # one MGET, of one key
    return answer, asked[0][1]


def _has_key(redis: RedisServer, key: str) -> None:
    """Wait for that key's write (queued, not awaited by the request) to reach Redis."""
    deadline = time.monotonic() + 30
    while redis.command("EXISTS", key) != "1":
        assert time.monotonic() < deadline, f"Redis never got {key}"
        time.sleep(0.05)


def test_a_string_translated_on_host_a_is_a_cache_hit_on_host_b(hosts: Hosts) -> None:
    a, b = hosts.a, hosts.b
    # `up` passed the URL to every replica through the config it wrote for each.
    for host in (a, b):
        assert hosts.redis.url in (host.run / "replica-0.yaml").read_text()
    first = _translate(a, "Open the shared file")
    assert first.status_code == 200 and first.json()["cached"] is False, first.text
    _stored(hosts.redis, 1)
    engine_runs = _metric(b, "hunyuan_engine_latency_seconds_count")
    second = _translate(b, "Open the shared file")
    assert second.status_code == 200, second.text
    assert second.json()["cached"] is True and second.json()["result"] == first.json()["result"]
    assert _metric(b, "hunyuan_cache_hits_total", layer="redis") == 1.0
    assert _metric(b, "hunyuan_engine_latency_seconds_count") == engine_runs  # B's engine did not run
    assert _metric(b, "hunyuan_cache_layer_up", layer="redis") == 1.0
    print(f"\nA {first.json()['latency_ms']} ms (engine), B {second.json()['latency_ms']} ms (Redis hit)")


@dataclass
class Load:
    """Bounded load on one host, each request a new text; answers recorded by the phase they ended in."""

    host: Host
    phase: str = "up"
    stop: threading.Event = field(default_factory=threading.Event)
    answers: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _next: int = 0

    def worker(self) -> None:
        with httpx.Client(base_url=self.host.url, timeout=120, trust_env=False) as http:
            while not self.stop.is_set():
                with self._lock:
                    self._next += 1
                    text = f"Load sentence number {self._next}"
                began = time.monotonic()
                try:
                    status = http.post("/translate", json={**BODY, "text": text}).status_code
                except httpx.HTTPError as err:
                    status = 0
                    self.errors.append(f"{type(err).__name__}: {err}")
                with self._lock:
                    self.answers.setdefault(self.phase, []).append((status, time.monotonic() - began))

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + 300
        while len(self.answers.get(self.phase, [])) < count:
            assert time.monotonic() < deadline, f"only {len(self.answers.get(self.phase, []))} answers"
            time.sleep(0.05)


def test_redis_killed_under_load_fails_no_request_and_is_used_again_when_back(hosts: Hosts) -> None:
    b, redis = hosts.b, hosts.redis
    load = Load(b)
    errors_before = {
        op: _metric(b, "hunyuan_cache_errors_total", layer="redis", op=op) for op in ("get", "set")
    }
    with ThreadPoolExecutor(CLIENTS) as pool:
        runs = [pool.submit(load.worker) for _ in range(CLIENTS)]
        try:
            load.wait_for(PHASE_REQUESTS)
            redis.kill()  # SIGKILL, under load
            load.phase = "killed"
            load.wait_for(PHASE_REQUESTS)
            layer_down = _metric(b, "hunyuan_cache_layer_up", layer="redis")
            redis.start()  # empty (no persistence), same port
            load.phase = "back"
            load.wait_for(PHASE_REQUESTS)
            _wait_metric(b, 1.0, "hunyuan_cache_layer_up", layer="redis")  # used again, under load
        finally:
            load.stop.set()
            for run in runs:
                run.result()
    errors = {
        op: _metric(b, "hunyuan_cache_errors_total", layer="redis", op=op) - errors_before[op]
        for op in errors_before
    }
    for phase, answers in load.answers.items():
        latencies = sorted(s for _, s in answers)
        failed = sum(1 for status, _ in answers if status != 200)
        p50, most = statistics.median(latencies) * 1000, latencies[-1] * 1000
        print(f"\n{phase:>6}: {len(answers)} requests, {failed} failed, p50 {p50:.0f} ms, max {most:.0f} ms")
    print(f"redis errors counted while killed: get {errors['get']:.0f}, set {errors['set']:.0f}")
    statuses = [status for answers in load.answers.values() for status, _ in answers]
    assert statuses and all(status == 200 for status in statuses), (statuses, load.errors[:5])
    assert layer_down == 0.0 and errors["get"] > 0 and errors["set"] > 0
    assert _metric(b, "hunyuan_cache_layer_up", layer="redis") == 1.0

    # Back: what host A translates now is a Redis hit on host B again.
    hits = _metric(b, "hunyuan_cache_hits_total", layer="redis")
    first, key = _asked_key(redis, lambda: _translate(hosts.a, "Shared after the restart"))
    assert first.json()["cached"] is False
    _has_key(redis, key)  # A's own write, whatever B's last writes of the load are still doing
    again = _translate(b, "Shared after the restart")
    assert again.status_code == 200 and again.json()["cached"] is True, again.text
    assert _metric(b, "hunyuan_cache_hits_total", layer="redis") == hits + 1

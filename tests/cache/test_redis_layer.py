"""The Redis cache layer against a real redis-server: round trip, namespaces, TTL, Redis down and back."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hunyuan_serve.cache.layers import TranslationCache
from hunyuan_serve.cache.redis_layer import RedisCache, RedisSettings, redacted
from hunyuan_serve.config import ConfigError, add_config_flags, build_config, config_from_args
from hunyuan_serve.replica.app import create_app
from tests.support.redis_server import RedisServer, redis_server
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path) as running:
        yield running


class Recorder:
    """The events a cache reports, in order (what the replica's metrics would count)."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, str]] = []
        self.states: list[tuple[str, bool]] = []

    def cache_error(self, layer: str, op: str) -> None:
        self.errors.append((layer, op))

    def cache_layer_up(self, layer: str, up: bool) -> None:
        self.states.append((layer, up))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_string_stored_through_one_cache_is_a_hit_through_another(server: RedisServer) -> None:
    settings = RedisSettings(server.url, ttl_s=3600)
    host_a, host_b = TranslationCache(10, redis=settings), TranslationCache(10, redis=settings)
    try:
        host_a.put("k", "你好")
        assert await host_a.get("k") == ("你好", "memory")
        await host_a.flush()
        assert await host_b.get("k") == ("你好", "redis")
        assert await host_b.get("k") == ("你好", "memory")  # copied into B's memory
        assert await host_b.get("missing") is None
        assert server.command("GET", "hunyuan-serve:k") == "你好"
        assert 3590 <= int(server.command("TTL", "hunyuan-serve:k")) <= 3600
    finally:
        await host_a.aclose()
        await host_b.aclose()


async def test_a_batch_is_one_pipelined_write_and_one_mget(server: RedisServer) -> None:
    settings = RedisSettings(server.url, ttl_s=60)
    host_a, host_b = TranslationCache(10, redis=settings), TranslationCache(10, redis=settings)
    try:
        host_a.put_many({"a": "1", "b": "2", "c": "3"})
        await host_a.flush()
        hits = await host_b.get_many(["c", "missing", "a"])
        assert hits == [("3", "redis"), None, ("1", "redis")]
        assert 50 <= int(server.command("TTL", "hunyuan-serve:b")) <= 60
    finally:
        await host_a.aclose()
        await host_b.aclose()


async def test_prefixes_keep_namespaces_apart_and_ttl_zero_keeps_entries(server: RedisServer) -> None:
    blue = TranslationCache(10, redis=RedisSettings(server.url, prefix="blue:", ttl_s=0))
    green = TranslationCache(10, redis=RedisSettings(server.url, prefix="green:"))
    try:
        blue.put("k", "v")
        await blue.flush()
        assert await green.get("k") is None
        assert server.command("KEYS", "*") == str(["blue:k"])
        assert server.command("TTL", "blue:k") == "-1"  # no expiry: Redis's maxmemory policy bounds it
    finally:
        await blue.aclose()
        await green.aclose()


async def test_a_stopped_redis_is_a_quick_miss_counted_and_logged_once(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    events, clock = Recorder(), Clock()
    layer = RedisCache(RedisSettings(server.url, retry_s=5.0), events, clock)
    try:
        await layer.set("k", "v")
        assert await layer.get("k") == "v" and layer.up is True
        server.kill()
        started = time.monotonic()
        with caplog.at_level(logging.INFO, logger="hunyuan_serve.cache"):
            assert await layer.get("k") is None  # tried: connection refused
            for _ in range(20):  # within retry_s: not tried at all
                assert await layer.get("k") is None
                await layer.set("k2", "v2")
        took = time.monotonic() - started
        print(f"\n41 calls on a stopped Redis took {took * 1000:.1f} ms")
        assert layer.up is False
        assert events.errors == [("redis", "get")] + [("redis", "get"), ("redis", "set")] * 20
        assert events.states == [("redis", True), ("redis", False)]
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "unavailable" in warnings[0].getMessage()
    finally:
        await layer.aclose()


async def test_a_redis_that_does_not_answer_costs_one_bounded_wait_then_nothing(server: RedisServer) -> None:
    events, clock = Recorder(), Clock()
    settings = RedisSettings(server.url, connect_timeout_s=0.2, timeout_s=0.2, retry_s=5.0)
    layer = RedisCache(settings, events, clock)
    try:
        await layer.set("k", "v")
        server.pause()
        started = time.monotonic()
        assert await layer.get("k") is None  # waits out its timeout: Redis took the bytes, sent nothing
        first = time.monotonic() - started
        started = time.monotonic()
        assert [await layer.get("k") for _ in range(10)] == [None] * 10  # down: not asked
        rest = time.monotonic() - started
        print(f"\nunanswering Redis: first get {first * 1000:.0f} ms, the next 10 {rest * 1000:.1f} ms")
        assert events.errors == [("redis", "get")] * 11 and layer.up is False
        server.resume()
        clock.now += 5.0
        assert await layer.get("k") == "v" and layer.up is True
    finally:
        server.resume()
        await layer.aclose()


async def test_sqlite_errors_are_reported_as_events(tmp_path: Path) -> None:
    events = Recorder()
    path = tmp_path / "translations.sqlite"
    cache = TranslationCache(10, path, busy_timeout_s=0.1, events=events)
    blocker = sqlite3.connect(str(path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another replica holding the write lock
    try:
        write = cache.put("k", "v")
        assert write is not None
        await asyncio.wrap_future(write)  # gives up after busy_timeout_s: a lost write
        assert cache.file is not None
        cache.file.close()  # a file that can no longer be read
        assert await cache.get("other") is None
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        cache.close()
    assert events.errors == [("sqlite", "set"), ("sqlite", "get")]


async def test_a_restarted_redis_is_used_again_after_retry_s(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    events, clock = Recorder(), Clock()
    layer = RedisCache(RedisSettings(server.url, retry_s=5.0), events, clock)
    try:
        await layer.set("k", "v")
        server.kill()
        assert await layer.get("k") is None
        server.start()  # empty: no persistence
        assert await layer.get("k") is None and layer.up is False  # still inside retry_s: not asked
        clock.now += 5.0
        with caplog.at_level(logging.INFO, logger="hunyuan_serve.cache"):
            await layer.set("k", "again")  # the client's pool reconnects by itself
            assert await layer.get("k") == "again"
        assert layer.up is True and events.states == [("redis", True), ("redis", False), ("redis", True)]
        assert [r.getMessage() for r in caplog.records].count(f"redis cache {server.url} answers") == 1
    finally:
        await layer.aclose()


async def test_a_password_in_the_url_is_never_logged(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"redis://:s3cret-pw@127.0.0.1:{server.port}/0"
    assert redacted(url) == f"redis://:***@127.0.0.1:{server.port}/0"
    assert redacted("redis://user:pw@[::1]:6379/2") == "redis://user:***@[::1]:6379/2"
    assert redacted(server.url) == server.url
    server.command("CONFIG", "SET", "requirepass", "s3cret-pw")
    layer = RedisCache(RedisSettings(url))
    try:
        with caplog.at_level(logging.INFO, logger="hunyuan_serve.cache"):
            await layer.set("k", "v")
            assert await layer.get("k") == "v"  # the password reached Redis
            server.kill()
            assert await layer.get("k") is None
        assert caplog.records and all("s3cret" not in r.getMessage() for r in caplog.records)
        assert any("***" in r.getMessage() for r in caplog.records)
    finally:
        await layer.aclose()


def test_config_takes_one_shared_layer_and_a_redis_url() -> None:
    with pytest.raises(ConfigError, match=r"cache_path .* or cache_redis_url"):
        build_config({"replica": {"cache_path": "/tmp/c.sqlite", "cache_redis_url": "redis://h:6379/0"}}, {})
    with pytest.raises(ConfigError, match="redis://"):
        build_config({}, {"replica.cache_redis_url": "http://h:6379"})
    parser = argparse.ArgumentParser()
    add_config_flags(parser, ["replica"])
    args = parser.parse_args(["--cache-redis-url", "redis://10.0.0.9:6379/0", "--cache-redis-ttl-s", "0"])
    replica = config_from_args(args).replica
    assert (replica.cache_redis_url, replica.cache_redis_ttl_s) == ("redis://10.0.0.9:6379/0", 0)
    assert (replica.cache_redis_prefix, replica.cache_path) == ("hunyuan-serve:", None)


def _metrics(client: httpx.Client) -> list[str]:
    return client.get("/metrics").text.splitlines()


def test_two_replica_apps_share_redis_and_keep_answering_without_it(server: RedisServer) -> None:
    """Two apps stand for two hosts (scripted engines): a hit across them, then Redis killed and back."""
    cfg = make_config(cache_redis_url=server.url, cache_redis_retry_s=0.05)
    engine_a, engine_b = FakeEngine(), FakeEngine()
    with (
        serve_in_thread(create_app(engine_a, cfg, "hunyuan")) as url_a,
        serve_in_thread(create_app(engine_b, cfg, "hunyuan")) as url_b,
        httpx.Client(base_url=url_a, timeout=10) as host_a,
        httpx.Client(base_url=url_b, timeout=10) as host_b,
    ):
        wait_ready(host_a)
        wait_ready(host_b)
        body = {"text": "shared", "source_lang": "en", "target_lang": "zh"}
        first = host_a.post("/translate", json=body).json()
        prefix = "hunyuan-serve:"
        deadline = time.monotonic() + 10
        while server.command("DBSIZE") == "0" and time.monotonic() < deadline:
            time.sleep(0.01)  # A's write is queued, not awaited by the request
        calls_b = engine_b.calls
        second = host_b.post("/translate", json=body).json()
        assert (first["cached"], second["cached"], second["result"]) == (False, True, first["result"])
        assert engine_b.calls == calls_b
        assert 'hunyuan_cache_hits_total{layer="redis"} 1.0' in _metrics(host_b)
        assert 'hunyuan_cache_layer_up{layer="redis"} 1.0' in _metrics(host_b)
        assert server.command("KEYS", "*").startswith(f"['{prefix}")

        server.kill()
        down = [host_b.post("/translate", json={**body, "text": f"down {i}"}) for i in range(5)]
        assert [r.status_code for r in down] == [200] * 5 and not any(r.json()["cached"] for r in down)
        lines = _metrics(host_b)
        assert 'hunyuan_cache_layer_up{layer="redis"} 0.0' in lines
        errors = [line for line in lines if line.startswith('hunyuan_cache_errors_total{layer="redis"')]
        print("\n" + "\n".join(errors))
        assert any('op="get"' in line for line in errors) and any('op="set"' in line for line in errors)

        server.start()
        time.sleep(0.1)  # past cache_redis_retry_s: the next call asks Redis again
        host_a.post("/translate", json={**body, "text": "back"})
        deadline = time.monotonic() + 10
        while server.command("DBSIZE") == "0" and time.monotonic() < deadline:
            time.sleep(0.01)
        back = host_b.post("/translate", json={**body, "text": "back"}).json()
        assert back["cached"] is True
        assert 'hunyuan_cache_hits_total{layer="redis"} 2.0' in _metrics(host_b)
        assert 'hunyuan_cache_layer_up{layer="redis"} 1.0' in _metrics(host_b)

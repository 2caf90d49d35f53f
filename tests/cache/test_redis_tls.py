"""Redis over TLS for real: a redis-server on its TLS port that wants a client certificate, two replica
processes (the engine stand-in) sharing the cache and the glossaries through it; a wrong CA refused."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from hunyuan_serve.cache.redis_layer import RedisCache, RedisSettings
from hunyuan_serve.storage.backend import StoreUnavailable
from hunyuan_serve.storage.jobs_redis import RedisDocumentJobs
from hunyuan_serve.storage.per_key import RedisStore
from tests.support.redis_server import RedisServer, RedisTls, redis_server
from tests.support.stacks import cli, free_port, http_ok, started, wait_until
from tests.support.tls_certs import Pair, make_ca

pytestmark = pytest.mark.timeout(300)

KEY = "sk-redis-tls-0123456789"
READY_TIMEOUT_S = 120.0
# The replicas' and the tests' own Redis deadlines. The defaults (0.25 s to connect, 0.25 s a command)
# are for a Redis beside an idle replica; a TLS handshake with a client certificate in a process that
# shares two cores with engines compiling took longer, the call was a miss that marked Redis down for
# cache_redis_retry_s, the write after it was skipped, and the other replica never found the entry.
# What is tested is the TLS link, not how fast it is made.
REDIS_TIMEOUT_S = 10.0
BODY = {"source_lang": "en", "target_lang": "zh"}
DEEPL = {"Authorization": f"DeepL-Auth-Key {KEY}"}


@dataclass
class Shared:
    redis: RedisServer
    client: Pair  # the replicas' certificate, which Redis asks for
    ca: Path
    replicas: tuple[str, str]


def _replica(model: Path, work: Path, name: str, redis: RedisServer, client: Pair, ca: Path) -> list[str]:
    argv = cli("replica", "--model", str(model), "--stand-in", "true", "--max-model-len", "512")
    argv += [
        "--port",
        str(free_port()),
        "--run-dir",
        str(work / f"run-{name}"),
        "--keys-file",
        str(work / "keys"),
    ]
    argv += ["--cache-redis-url", redis.url, "--cache-redis-tls-ca", str(ca)]
    argv += [
        "--cache-redis-connect-timeout-s",
        str(REDIS_TIMEOUT_S),
        "--cache-redis-timeout-s",
        str(REDIS_TIMEOUT_S),
    ]
    return [*argv, "--cache-redis-tls-cert", str(client.cert), "--cache-redis-tls-key", str(client.key)]


@pytest.fixture(scope="module")
def shared(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    work = tmp_path_factory.mktemp("redis-tls")
    ca = make_ca(work / "pki")
    server, client = ca.issue(work / "pki", "redis"), ca.issue(work / "pki", "replica", client=True)
    (work / "keys").write_text(KEY + "\n")
    with (
        redis_server(work, RedisTls(server.cert, server.key, ca.cert)) as redis,
        contextlib.ExitStack() as stack,
    ):
        urls = []
        for name in ("a", "b"):
            argv = _replica(tiny_model_dir, work, name, redis, client, ca.cert)
            port = argv[argv.index("--port") + 1]
            proc = stack.enter_context(started(argv, log=work / f"replica-{name}.log"))
            urls.append((f"http://127.0.0.1:{port}", proc, work / f"replica-{name}.log"))
        for url, proc, log in urls:  # both start at once: one start's wait, not two
            wait_until(proc, log, http_ok(url + "/health"), READY_TIMEOUT_S, f"replica {url} ready")
        yield Shared(redis, client, ca.cert, (urls[0][0], urls[1][0]))


def _translate(url: str, text: str) -> dict[str, object]:
    answer = httpx.post(
        url + "/translate",
        json={**BODY, "text": text},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_one_replica_answers_from_what_the_other_cached_in_redis_over_tls(shared: Shared) -> None:
    a, b = shared.replicas
    assert _translate(a, "Save the file before closing")["cached"] is False
    # a writes Redis after it answers (layers.py queues the write), so on a loaded machine b could ask
    # before the entry lands: wait for it, else b's miss would be a race and not a defect.
    _wait_for_keys(shared, 1)
    assert _translate(b, "Save the file before closing")["cached"] is True  # b's memory never saw it


def _wait_for_keys(shared: Shared, count: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    cert = (shared.client.cert, shared.client.key)
    while int(shared.redis.command("DBSIZE", client_cert=cert)) < count:
        assert time.monotonic() < deadline, f"fewer than {count} keys in Redis after {timeout_s:.0f}s"
        time.sleep(0.05)


def test_a_glossary_made_on_one_replica_is_listed_by_the_other(shared: Shared) -> None:
    a, b = shared.replicas
    body = {
        "name": "tls",
        "source_lang": "en",
        "target_lang": "de",
        "entries": "Hello\tHallo",
        "entries_format": "tsv",
    }
    made = httpx.post(a + "/v2/glossaries", json=body, headers=DEEPL, timeout=30)
    assert made.status_code == 201, made.text
    listed = httpx.get(b + "/v2/glossaries", headers=DEEPL, timeout=30).json()["glossaries"]
    assert [g["glossary_id"] for g in listed] == [made.json()["glossary_id"]]


def _settings(shared: Shared, ca: Path, client: Pair | None) -> RedisSettings:
    cert, key = (str(client.cert), str(client.key)) if client else (None, None)
    timeout = REDIS_TIMEOUT_S
    return RedisSettings(shared.redis.url, "tls-test:", 0, timeout, timeout, 1.0, str(ca), cert, key)


def test_a_redis_whose_certificate_the_ca_did_not_sign_is_refused_saying_why(
    shared: Shared, tmp_path: Path
) -> None:
    other = make_ca(tmp_path, "other")  # not the CA that signed Redis's certificate
    store = RedisStore(_settings(shared, other.cert, shared.client))
    with pytest.raises(StoreUnavailable, match="certificate verify failed"):
        asyncio.run(store.glossaries("someone"))
    cache = RedisCache(_settings(shared, other.cert, shared.client))
    assert asyncio.run(cache.get("k")) is None and cache.up is False  # a miss, never a wrong answer


def test_without_the_client_certificate_redis_refuses_the_link(shared: Shared) -> None:
    store = RedisStore(_settings(shared, shared.ca, None))
    with pytest.raises(StoreUnavailable):
        asyncio.run(store.glossaries("someone"))


def test_the_document_jobs_take_the_same_tls_link(shared: Shared, tmp_path: Path) -> None:
    jobs = RedisDocumentJobs(_settings(shared, shared.ca, shared.client))
    try:
        assert jobs.get("someone", "no-such-job") is None and jobs.claim("worker", 5.0, 3) is None
    finally:
        jobs.close()
    wrong = RedisDocumentJobs(_settings(shared, make_ca(tmp_path, "other").cert, shared.client))
    try:
        with pytest.raises(StoreUnavailable, match="certificate verify failed"):
            wrong.get("someone", "no-such-job")
    finally:
        wrong.close()

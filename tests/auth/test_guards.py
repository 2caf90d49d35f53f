"""The key guards' decisions: wrong keys slowed per address, whose forwarded address is believed, who may
ask the deep health, which secret files a config names and which of them others may read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hunyuan_serve import auth
from hunyuan_serve.auth.secret_files import secret_paths
from hunyuan_serve.config import SecretFileError, build_config
from hunyuan_serve.edge import dialects

KEY = "sk-guards-0123456789"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_past_the_limit_an_address_is_slowed_for_retry_after_then_counts_afresh() -> None:
    clock = Clock()
    bad = auth.BadKeys(3, 60.0, 30, clock)
    assert [bad.wrong("203.0.113.5") for _ in range(3)] == [None, None, None]
    assert bad.wrong("203.0.113.5") == 30  # the fourth wrong key in the window
    assert bad.slowed_for("198.51.100.7") is None  # another address is not
    clock.now += 29.5
    assert bad.slowed_for("203.0.113.5") == 1  # whole seconds, rounded up
    clock.now += 1
    assert bad.slowed_for("203.0.113.5") is None
    assert bad.wrong("203.0.113.5") is None  # a fresh count after the pause


def test_wrong_keys_older_than_the_window_do_not_count() -> None:
    clock = Clock()
    bad = auth.BadKeys(2, 10.0, 5, clock)
    for _ in range(5):
        assert bad.wrong("203.0.113.5") is None
        clock.now += 6  # never more than two within any ten seconds
    assert auth.BadKeys(0, 10.0, 5, clock).wrong("203.0.113.5") is None  # limit 0: never slowed


def _scope(peer: str, headers: dict[str, str], query: bytes = b"") -> dict[str, object]:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return {"type": "http", "client": (peer, 40000), "headers": raw, "query_string": query, "path": "/health"}


def test_the_forwarded_address_is_believed_from_the_front_only() -> None:
    forwarded = {"X-Forwarded-For": "192.0.2.1, 203.0.113.5"}  # the caller wrote the first, Nginx the last
    assert auth.client_address(_scope("127.0.0.1", forwarded), False) == "203.0.113.5"
    assert auth.client_address(_scope("10.0.0.8", forwarded), True) == "203.0.113.5"  # the gateway's Nginx
    assert auth.client_address(_scope("10.0.0.8", forwarded), False) == "10.0.0.8"  # anyone else: its own
    assert auth.client_address(_scope("127.0.0.1", {"X-Real-IP": "192.0.2.1"}), False) == "127.0.0.1"


@pytest.mark.parametrize(
    ("peer", "headers", "keys", "behind", "allowed"),
    [
        ("127.0.0.1", {}, None, False, True),  # the supervisor's own probe
        ("::1", {}, None, False, True),
        ("127.0.0.1", {"X-Forwarded-For": "203.0.113.5"}, None, False, False),  # Nginx forwarding a caller
        ("10.0.0.8", {}, None, False, False),
        ("10.0.0.8", {}, None, True, True),  # passed the peer check: the gateway
        ("10.0.0.8", {"Authorization": f"Bearer {KEY}"}, frozenset({KEY}), False, True),
        ("10.0.0.8", {"Authorization": "Bearer sk-wrong-key-000000"}, frozenset({KEY}), False, False),
        ("10.0.0.8", {"Authorization": f"Bearer {KEY}"}, None, False, False),  # no keys: a key proves nothing
    ],
)
def test_who_may_ask_the_deep_health(
    peer: str, headers: dict[str, str], keys: frozenset[str] | None, behind: bool, allowed: bool
) -> None:
    why = auth.deep_refusal(_scope(peer, headers), keys, behind)
    assert (why is None) == allowed
    if why is not None:
        assert (
            "loopback" in why and ("API key" in why) == bool(keys) and "GET /health (shallow) is open" in why
        )


def test_the_address_the_replica_binds_is_this_host_for_the_deep_health() -> None:
    assert auth.deep_refusal(_scope("10.0.0.5", {}), None, False, frozenset({"10.0.0.5"})) is None
    assert auth.deep_refusal(_scope("10.0.0.6", {}), None, False, frozenset({"10.0.0.5"})) is not None


def test_a_key_in_the_query_counts_for_the_deep_health() -> None:
    assert (
        auth.deep_refusal(_scope("10.0.0.8", {}, f"deep=1&token={KEY}".encode()), frozenset({KEY}), False)
        is None
    )


def test_the_slowed_answer_is_each_apis_429_shape() -> None:
    message = auth.throttle.SLOWED_MESSAGE.format(seconds=60)
    assert dialects.OPENAI.error("too_many_bad_keys", message, 429)["error"]["type"] == "rate_limit_error"
    assert dialects.DEEPL.error("too_many_bad_keys", message, 429) == {"message": message}
    assert dialects.LIBRETRANSLATE.error("too_many_bad_keys", message, 429) == {"error": message}


def _secret(path: Path, mode: int) -> str:
    path.write_text("sk-guards-0123456789abcdef\n")
    path.chmod(mode)
    return str(path)


def test_every_secret_file_a_config_names_is_found(tmp_path: Path) -> None:
    cfg = build_config(
        {
            "auth": {"keys_file": "keys.txt", "peer_secret_file": "peer.secret"},
            "replica": {
                "cache_redis_url": "rediss://10.0.0.9:6380/0",
                "cache_redis_tls_cert": "r.crt",
                "cache_redis_tls_key": "r.key",
            },
        },
        {},
    )
    found = dict(secret_paths(cfg))
    assert {"auth.keys_file", "auth.peer_secret_file", "replica.cache_redis_tls_key"} <= set(found)
    assert "replica.cache_redis_tls_cert" not in found  # a certificate is public
    assert found["replica.cache_redis_tls_key"] == str(Path("r.key").absolute())


def test_a_secret_others_may_read_is_named_with_its_fix(tmp_path: Path) -> None:
    open_keys = _secret(tmp_path / "keys.txt", 0o644)
    closed = _secret(tmp_path / "peer.secret", 0o600)
    cfg = build_config({"auth": {"keys_file": open_keys, "peer_secret_file": closed}}, {})
    (problem,) = auth.exposed_secrets(cfg)
    assert (
        problem.startswith(f"auth.keys_file {open_keys} has mode 0644")
        and f"chmod 600 {open_keys}" in problem
    )
    with pytest.raises(SecretFileError) as refused:  # what `up`, reload and the gateway refuse with: exit 2
        auth.open_listen_problem(cfg)
    assert str(refused.value) == problem
    assert auth.exposed_secrets(build_config({"auth": {"keys_file": str(tmp_path / "missing")}}, {})) == []


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_a_secret_another_user_owns_is_the_mounts_to_guard(tmp_path: Path) -> None:
    mounted = _secret(tmp_path / "keys.txt", 0o644)
    os.chown(mounted, 65534, 65534)  # as a container's or a Kubernetes Secret's file, root's or nobody's
    assert auth.exposed_secrets(build_config({"auth": {"keys_file": mounted}}, {})) == []

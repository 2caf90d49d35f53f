"""A front renewal `reload` refused stays off: `up`'s Nginx serves its run dir's copies of the last pair
accepted, so a mismatched key written over the configured files is neither served nor read by the
Nginx reloads that a replica killed and restarted causes; a good renewal then replaces the copies.

Real `up`, Nginx and a stand-in replica (no engine loads). Heavy:
`flock /tmp/hs-heavy.lock .venv/bin/pytest -q tests/supervise/test_tls_kept_e2e.py`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hunyuan_serve.run.events import read_events
from hunyuan_serve.run.state import read_state
from tests.support.stacks import cli, free_ports, replicas_ready, started, tail, wait_event
from tests.support.tls_certs import Pair, make_ca, other_key, served_fingerprint

READY_TIMEOUT_S = 300.0  # `up`, Nginx and a stand-in replica on a loaded two-core machine
RELOAD_TIMEOUT_S = 120.0
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.nginx,
    pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed"),
    pytest.mark.timeout(READY_TIMEOUT_S + 4 * RELOAD_TIMEOUT_S),
]


def write_over(cert: Path, key: Path, live: Path) -> None:
    """The files at the configured paths rewritten in place (same inodes), as a careless renewal does."""
    for source, name in ((cert, "fullchain.pem"), (key, "privkey.pem")):
        (live / name).write_bytes(source.read_bytes())


def reload(run_dir: Path) -> subprocess.CompletedProcess[str]:
    argv = cli("reload", "--run-dir", str(run_dir))
    return subprocess.run(argv, capture_output=True, text=True, timeout=RELOAD_TIMEOUT_S)


def nginx_test(run_dir: Path) -> subprocess.CompletedProcess[str]:
    """`nginx -t` of the config the running Nginx was last given, as the next reload would run it."""
    prefix = run_dir / "nginx"
    argv = [NGINX, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e", str(prefix / "logs/error.log")]
    return subprocess.run([*argv, "-t", "-q"], capture_output=True, text=True, timeout=60)


def _config(tmp_path: Path, model: Path, live: Path) -> tuple[Path, int, int]:
    port, tls_port, base = free_ports(3)
    nginx: dict[str, object] = {"port": port, "tls_port": tls_port, "worker_processes": 1}
    nginx.update(tls_cert=str(live / "fullchain.pem"), tls_key=str(live / "privkey.pem"))
    settings = {
        "replicas": 1,
        "base_port": base,
        "run_dir": str(tmp_path / "run"),
        "engine": {"model": str(model), "stand_in": True, "max_model_len": 512},
        "replica": {"max_tokens": 8},
        "supervisor": {
            "probe_interval_s": 0.25,
            "drain_timeout_s": 5.0,
            "kill_timeout_s": 5.0,
            "restart_backoff_base_s": 0.5,
        },
        "nginx": nginx,
    }
    config = tmp_path / "up.yaml"
    config.write_text(yaml.safe_dump(settings))
    return config, port, tls_port


def _kill_replica(run_dir: Path) -> None:
    state = read_state(run_dir)
    assert state is not None
    os.kill(state["replicas"][0]["pid"], signal.SIGKILL)


def test_a_refused_renewal_is_not_served_after_a_replica_restart_reloads_nginx(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    ca = make_ca(tmp_path / "pki")
    first, renewed = ca.issue(tmp_path / "pki", "first"), ca.issue(tmp_path / "pki", "renewed")
    live = tmp_path / "live"
    live.mkdir()
    _install(first, live)
    config, port, tls_port = _config(tmp_path, tiny_model_dir, live)
    run_dir, log = tmp_path / "run", tmp_path / "up.log"
    ready = replicas_ready(f"http://127.0.0.1:{port}", 1)
    with started(cli("up", "--config", str(config)), log=log, ready=ready, timeout_s=READY_TIMEOUT_S) as up:
        assert served_fingerprint(tls_port) == first.fingerprint

        # Another pair's key written over privkey.pem in place, a renewed certificate over fullchain.pem.
        write_over(renewed.cert, other_key(tmp_path / "stray.key"), live)
        done = reload(run_dir)
        assert done.returncode == 1 and "refused, nothing was changed" in done.stderr, (
            done.stdout + done.stderr
        )
        assert "does not match the certificate" in done.stderr
        assert served_fingerprint(tls_port) == first.fingerprint

        # The replica killed: Nginx reloads to evict it, and again to admit its restart, with the
        # refused files still in place. The first of those reloads that Nginx refuses fails the test.
        def events() -> list[dict[str, Any]]:
            return read_events(run_dir / "events.jsonl")

        mark = len(events())
        _kill_replica(run_dir)
        wanted = {"admitted", "nginx_reload_failed", "nginx_failed"}
        outcome = wait_event(up, log, events, lambda e: e["event"] in wanted, RELOAD_TIMEOUT_S, mark)
        assert outcome["event"] == "admitted", f"{outcome}\n{tail(log)}"
        since = [e["event"] for e in events()[mark:]]
        assert "evicted" in since, since  # a reload with the refused files in place, and one more
        assert served_fingerprint(tls_port) == first.fingerprint
        checked = nginx_test(run_dir)
        assert checked.returncode == 0, checked.stdout + checked.stderr

        # A good renewal replaces the copies and is served after `reload`.
        _install(renewed, live)
        done = reload(run_dir)
        assert done.returncode == 0, done.stdout + done.stderr + tail(log)
        assert served_fingerprint(tls_port) == renewed.fingerprint
        kept = run_dir / "tls"  # the copies Nginx serves, the key's owner's alone
        assert (kept / "front.crt").read_bytes() == renewed.cert.read_bytes()
        assert (kept.stat().st_mode & 0o777, (kept / "front.key").stat().st_mode & 0o777) == (0o700, 0o600)


def _install(pair: Pair, live: Path) -> None:
    """A renewal as certbot's deploy step leaves it: each file whole, renamed over the one in place."""
    for source, name in ((pair.cert, "fullchain.pem"), (pair.key, "privkey.pem")):
        staged = live / f".{name}.new"
        shutil.copyfile(source, staged)
        staged.chmod(0o600)
        os.replace(staged, live / name)

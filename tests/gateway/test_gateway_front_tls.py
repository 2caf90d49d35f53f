"""The gateway's front renews its certificate: `gateway reload` serves a renewed pair, refuses an expired
one and a key of another pair with the old pair still served, also after Nginx reloads for a new host;
and a busy TLS port refuses the start. A real gateway and its Nginx on loopback, a fake host's listing."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from hunyuan_serve.cli import main
from tests.support.gateway import GatewayRun
from tests.support.stacks import cli, free_port, free_ports, started
from tests.support.tls_certs import CA, DAY, Pair, make_ca, other_key, served_fingerprint

pytestmark = [
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed"),
]

START_TIMEOUT_S = 60.0  # the gateway and its Nginx, no engine


def install(pair: Pair, key: Path, live: Path) -> None:
    """A renewal as certbot's deploy step leaves it: each file whole, renamed over the one in place."""
    for source, name in ((pair.cert, "fullchain.pem"), (key, "privkey.pem")):
        staged = live / f".{name}.new"
        shutil.copyfile(source, staged)
        os.chmod(staged, 0o600)
        os.replace(staged, live / name)


def reload(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["gateway", "reload", "--run-dir", str(run_dir)])
    out = capsys.readouterr()
    return code, out.out + out.err


@contextlib.contextmanager
def fake_host(port: int, replica_port: int) -> Iterator[None]:
    """A host's Nginx as the gateway polls it: a listing of one loopback replica (nothing answers there)."""
    listing = {
        "model": "m",
        "replicas": [{"name": "replica-0", "addr": f"127.0.0.1:{replica_port}", "ready": True}],
    }
    body = json.dumps(listing).encode()

    class Listing(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Listing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _inventory(tmp_path: Path, live: Path, host_port: int) -> tuple[Path, int]:
    port, tls_port, status_port = free_ports(3)
    nginx = {
        "listen": "127.0.0.1",
        "port": port,
        "tls_port": tls_port,
        "status_port": status_port,
        "worker_processes": 1,
        "tls_cert": str(live / "fullchain.pem"),
        "tls_key": str(live / "privkey.pem"),
    }
    data = {
        "hosts": [{"name": "a", "url": f"http://127.0.0.1:{host_port}"}],
        "gateway": {"discovery_interval_s": 0.5, "probe_interval_s": 0.25},
        "nginx": nginx,
    }
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, tls_port


def _pairs(ca: CA, pki: Path) -> dict[str, Pair]:
    now = datetime.datetime.now(datetime.UTC)
    return {
        "first": ca.issue(pki / "first", "front"),
        "renewed": ca.issue(pki / "renewed", "front"),
        "expired": ca.issue(pki / "expired", "front", not_before=now - 30 * DAY, not_after=now - DAY),
    }


def test_a_renewal_is_served_after_reload_and_a_bad_one_is_refused_keeping_the_old(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = _pairs(make_ca(tmp_path / "pki"), tmp_path / "pki")
    live = tmp_path / "live"
    live.mkdir()
    install(pairs["first"], pairs["first"].key, live)
    host_port, replica_port = free_ports(2)
    path, tls_port = _inventory(tmp_path, live, host_port)
    run_dir, log = tmp_path / "run", tmp_path / "gateway.log"
    argv = cli("gateway", "--inventory", str(path), "--run-dir", str(run_dir))
    with started(
        argv, log=log, ready=lambda: served_fingerprint(tls_port) is not None, timeout_s=START_TIMEOUT_S
    ) as proc:
        gateway = GatewayRun(proc, run_dir, 0, log)
        assert served_fingerprint(tls_port) == pairs["first"].fingerprint

        install(pairs["renewed"], pairs["renewed"].key, live)
        code, said = reload(run_dir, capsys)
        assert code == 0 and "gateway reload 1 done: Nginx reloaded; the front serves " in said, said
        # reload_done comes once only the new config's workers accept: a new connection sees the renewal.
        assert served_fingerprint(tls_port) == pairs["renewed"].fingerprint

        for rid, (pair, key, why) in enumerate(
            [
                (pairs["expired"], pairs["expired"].key, "expired on "),
                (pairs["renewed"], other_key(tmp_path / "other.key"), "does not match the certificate"),
                (pairs["renewed"], pairs["renewed"].key, "has mode 0644: others may read it"),
            ],
            start=2,
        ):
            install(pair, key, live)
            if rid == 4:  # a key others may read: exit 2, as every command refusing a secret file
                (live / "privkey.pem").chmod(0o644)
            code, said = reload(run_dir, capsys)
            assert code == (2 if rid == 4 else 1), said
            assert f"gateway reload {rid} refused, the front keeps the pair it serves: " in said, said
            assert why in said and str(live) in said, said
            assert served_fingerprint(tls_port) == pairs["renewed"].fingerprint

        # The files in place are still another pair's: a host coming up reloads Nginx on the new routing,
        # and Nginx must keep serving the pair last accepted, not read the refused one.
        mark = len(gateway.events())
        with fake_host(host_port, replica_port):
            gateway.wait_event(lambda e: e["event"] == "host_up", 30, mark)
            gateway.wait_event(lambda e: e["event"] == "nginx_reloaded", 30, mark)
        assert served_fingerprint(tls_port) == pairs["renewed"].fingerprint
        state = gateway.state()
        assert "valid until" in str(state["nginx"]["tls"]), state["nginx"]


def test_a_busy_tls_port_refuses_the_start_leaving_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = make_ca(tmp_path / "pki").issue(tmp_path / "pki", "front")
    live = tmp_path / "live"
    live.mkdir()
    install(pair, pair.key, live)
    path, tls_port = _inventory(tmp_path, live, free_port())
    run_dir = tmp_path / "run"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", tls_port))
        holder.listen()
        assert main(["gateway", "--inventory", str(path), "--run-dir", str(run_dir)]) == 1
    message = capsys.readouterr().err
    assert f"cannot start: port {tls_port} on 127.0.0.1 is in use by " in message, message
    assert not run_dir.exists()  # refused before the run dir and its lock

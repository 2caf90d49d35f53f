"""TLS at the edge in the rendered nginx.conf: nothing of it when off, `nginx -t` accepts every plain-port
mode, and a real Nginx with plain_http off keeps the plain port to this host while TLS serves."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from hunyuan_serve.config import build_config
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.run.health import State
from tests.support.edge import NGINX, edge, nginx_t
from tests.support.stacks import free_ports
from tests.support.tls_certs import CA, Pair, make_ca

FOREIGN = "127.0.0.2"  # on lo, but not an address this host's own processes call the plain port from


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def pair(ca: CA, tmp_path_factory: pytest.TempPathFactory) -> Pair:
    return ca.issue(tmp_path_factory.mktemp("certs"), "edge")


def _render(overrides: dict[str, object]) -> str:
    cfg = build_config({}, overrides)
    routing = routing_from_states([("127.0.0.1:8101", State.READY)])
    return render_nginx(cfg, routing, prefix=Path("/p"), web_root=Path("/w"), worker_user=None)


def _tls(pair: Pair, **extra: object) -> dict[str, object]:
    return {"nginx.tls_cert": str(pair.cert), "nginx.tls_key": str(pair.key), **extra}


def test_tls_off_renders_nothing_of_it() -> None:
    text = _render({})
    assert "ssl" not in text and "hs_own_host" not in text and "Strict-Transport-Security" not in text


def test_tls_renders_http2_modern_protocols_hsts_and_the_redirect(pair: Pair) -> None:
    text = _render(_tls(pair, **{"nginx.tls_port": 9443, "nginx.hsts_max_age_s": 86400}))
    assert "listen 127.0.0.1:8080;\n        # HTTP/2" in text and "listen 127.0.0.1:9443 ssl http2;" in text
    assert f'ssl_certificate "{pair.cert}";' in text and f'ssl_certificate_key "{pair.key}";' in text
    assert "ssl_protocols TLSv1.2 TLSv1.3;" in text and "return 308 https://$host:9443$request_uri;" in text
    assert 'https "max-age=86400";' in text
    # every block that adds headers of its own repeats HSTS (add_header there drops the server's)
    assert text.count("add_header Strict-Transport-Security $hs_hsts always;") == text.count("location @") + 1
    assert "return 308 https://$host$request_uri;" in _render(_tls(pair, **{"nginx.tls_port": 443}))
    served = _render(_tls(pair, **{"nginx.plain_http": "serve"}))
    assert (
        "return 308" not in served
        and "return 444" not in served
        and "Strict-Transport-Security" not in served
    )


def test_off_binds_a_wildcard_listen_plain_port_to_loopback(pair: Pair) -> None:
    text = _render(_tls(pair, **{"nginx.plain_http": "off", "nginx.listen": "0.0.0.0"}))
    assert "listen 127.0.0.1:8080;" in text and "listen 0.0.0.0:8443 ssl http2;" in text
    assert "return 444;" in text
    own = _render(_tls(pair, **{"nginx.plain_http": "off", "nginx.listen": "10.1.2.3"}))
    assert "listen 10.1.2.3:8080;" in own and "        10.1.2.3 1;" in own  # its own address keeps it


@pytest.mark.nginx
@pytest.mark.skipif(NGINX is None, reason="nginx is not installed")
@pytest.mark.parametrize("plain", ["serve", "redirect", "off"])
def test_nginx_accepts_each_plain_port_mode(pair: Pair, tmp_path: Path, plain: str) -> None:
    text = _render(_tls(pair, **{"nginx.plain_http": plain, "nginx.hsts_max_age_s": 60}))
    done = nginx_t(tmp_path, text.replace("/p/", f"{tmp_path}/"))
    assert done.returncode == 0, done.stderr


def _curl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["curl", "-sS", "--max-time", "10", *args], capture_output=True, text=True, timeout=30
    )


@pytest.mark.nginx
@pytest.mark.skipif(NGINX is None, reason="nginx is not installed")
async def test_plain_port_off_serves_only_this_host_while_tls_serves_all(
    ca: CA, pair: Pair, tmp_path: Path
) -> None:
    port, tls_port = free_ports(2)
    nginx = {
        "port": port,
        "tls_port": tls_port,
        "worker_processes": 1,
        "listen": "0.0.0.0",
        "plain_http": "off",
    }
    cfg = build_config({"nginx": {**nginx, "tls_cert": str(pair.cert), "tls_key": str(pair.key)}}, {})
    async with edge(tmp_path, cfg, [9]):
        own = await asyncio.to_thread(
            _curl, "-o", "/dev/null", "-w", "%{http_code}", f"http://127.0.0.1:{port}/health"
        )
        assert own.stdout == "200", own.stderr  # the supervisor's own checks
        foreign = await asyncio.to_thread(_curl, "--interface", FOREIGN, f"http://127.0.0.1:{port}/health")
        assert foreign.returncode == 52 and "Empty reply" in foreign.stderr  # closed on, nothing sent back
        elsewhere = await asyncio.to_thread(_curl, f"http://{FOREIGN}:{port}/health")
        assert elsewhere.returncode == 7  # the plain port is not bound there at all
        tls = ["--cacert", str(ca.cert), "--interface", FOREIGN, "-o", "/dev/null", "-w", "%{http_code}"]
        served = await asyncio.to_thread(_curl, *tls, f"https://127.0.0.1:{tls_port}/health")
        assert served.stdout == "200", served.stderr

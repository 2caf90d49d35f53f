"""TLS between the gateway and its hosts, the pure parts and one real refusal: the inventory's rules, what
a listing must say, the rendered upstream TLS lines (checked by `nginx -t`), and a start refused."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hunyuan_serve.cli import main
from hunyuan_serve.config import ConfigError, build_config
from hunyuan_serve.edge.layout import GatewayFront
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import Routing, UpstreamServer
from hunyuan_serve.gateway.discovery import DiscoveryError, HttpDiscovery
from hunyuan_serve.gateway.hosts import parse_listing
from hunyuan_serve.gateway.inventory import load_inventory, parse_inventory
from hunyuan_serve.gateway.tls import client_context, listing_problem, upstream_tls
from hunyuan_serve.replica.tls import from_this_host, refusal
from tests.support.edge import NGINX, nginx_t
from tests.support.stacks import free_port
from tests.support.tls_certs import make_ca

TLS_HOSTS = [{"name": "a", "url": "https://10.77.0.2:8443"}, {"name": "b", "url": "https://10.77.0.3:8443"}]
TLS = {"tls_ca": "/etc/hs/ca.crt", "tls_name": "replicas.hs.internal"}

REFUSED: list[tuple[dict[str, Any], str]] = [
    (
        {"hosts": [TLS_HOSTS[0], {"name": "b", "url": "http://127.0.0.1:8080"}], **TLS},
        "hosts: a https and b http: a gateway's hosts are all https or all http",
    ),
    ({"hosts": TLS_HOSTS}, "tls_ca and tls_name: needed with https hosts"),
    ({"hosts": TLS_HOSTS, "tls_ca": "/ca.crt"}, "tls_name: needed with https hosts"),
    ({"hosts": TLS_HOSTS, **TLS, "tls_cert": "/c.crt"}, "tls_cert and tls_key are set together"),
    (
        {"hosts": [{**TLS_HOSTS[0], "allow_plain": True}], **TLS},
        "hosts[0].allow_plain: the url is https; drop allow_plain",
    ),
    (
        {"hosts": [{"name": "a", "url": "http://127.0.0.1:8080"}], "tls_ca": "/ca.crt"},
        "tls_ca: set, but every host url is http:// (write https:// for TLS)",
    ),
    (
        {
            "peer_secret_file": "/s",
            "hosts": [
                {"name": "a", "url": "http://127.0.0.1:8080"},
                {"name": "gpu-b", "url": "http://10.0.0.9:80"},
            ],
        },
        "hosts[1] (gpu-b): the peer secret would cross the network in plain HTTP to 10.0.0.9, which is not "
        "loopback; give the host an https:// url",
    ),
    ({"hosts": TLS_HOSTS, **TLS, "tls_name": "10.77.0.2:1"}, "tls_name: '10.77.0.2:1' is not a DNS name"),
    ({"hosts": TLS_HOSTS, **TLS, "tls_ca": "/a b.crt"}, "tls_ca: '/a b.crt': a path with a quote"),
]


@pytest.mark.parametrize(("data", "problem"), REFUSED)
def test_an_inventory_whose_tls_does_not_hold_together_is_refused(
    tmp_path: Path, data: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_inventory(data, "inv.yaml", tmp_path)
    assert problem in str(err.value), err.value


def test_plain_hosts_stay_allowed_on_loopback_or_where_the_inventory_says_so(tmp_path: Path) -> None:
    loopback = [{"name": "a", "url": "http://127.0.0.1:8080"}, {"name": "b", "url": "http://localhost:8081"}]
    assert len(parse_inventory({"peer_secret_file": "/s", "hosts": loopback}, "i", tmp_path).hosts) == 2
    allowed = [{"name": "a", "url": "http://10.0.0.9:80", "allow_plain": True}]
    assert parse_inventory({"peer_secret_file": "/s", "hosts": allowed}, "i", tmp_path).hosts[0].allow_plain
    # No secret, nothing secret on the wire: a plain host anywhere, as before.
    assert parse_inventory({"hosts": [{"name": "a", "url": "http://10.0.0.9:80"}]}, "i", tmp_path)


def test_the_tls_files_are_read_beside_the_inventory(tmp_path: Path) -> None:
    data = {"hosts": TLS_HOSTS, "tls_ca": "ca.crt", "tls_cert": "gw.crt", "tls_key": "/abs/gw.key"}
    inv = parse_inventory({**data, "tls_name": "r.hs"}, "i", tmp_path)
    assert (inv.tls_ca, inv.tls_cert, inv.tls_key) == (
        str(tmp_path / "ca.crt"),
        str(tmp_path / "gw.crt"),
        "/abs/gw.key",
    )
    assert inv.hosts[0].tls and inv.hosts[0].address == "10.77.0.2"
    with pytest.raises(ConfigError, match=r"cannot use .*ca\.crt"):
        client_context(inv)


def _listing(addr: str, tls: bool) -> Any:
    data: dict[str, Any] = {"model": "m", "replicas": [{"name": "r0", "addr": addr, "ready": True}]}
    return parse_listing({**data, "tls": True} if tls else data)


def test_a_listing_must_match_the_hosts_scheme_and_keep_the_secret_off_plain_links(tmp_path: Path) -> None:
    https = parse_inventory({"hosts": TLS_HOSTS, **TLS}, "i", tmp_path).hosts[0]
    plain = parse_inventory({"hosts": [{"name": "a", "url": "http://127.0.0.1:80"}]}, "i", tmp_path).hosts[0]
    allowed = plain.model_copy(update={"allow_plain": True})
    assert listing_problem(https, _listing("10.77.0.2:8101", True), secret=True) is None
    assert "its url is https but its replicas listen in plain HTTP" in str(
        listing_problem(https, _listing("10.77.0.2:8101", False), secret=True)
    )
    assert "give it an https:// url" in str(listing_problem(plain, _listing("127.0.0.1:8101", True), True))
    assert listing_problem(plain, _listing("127.0.0.1:8101", False), secret=True) is None
    assert "replica r0 at 10.0.0.5:8101 is not loopback" in str(
        listing_problem(plain, _listing("10.0.0.5:8101", False), secret=True)
    )
    assert listing_problem(allowed, _listing("10.0.0.5:8101", False), secret=True) is None
    assert listing_problem(plain, _listing("10.0.0.5:8101", False), secret=False) is None


def _gateway_conf(tmp_path: Path, inv: Any) -> str:
    routing = Routing(
        (UpstreamServer("10.77.0.2:8101", False, "a/r0"), UpstreamServer("10.77.0.3:8101", True))
    )
    front = GatewayFront("m", None, {"a": {"state": "up"}})
    cfg = inv.serve_config()
    return render_nginx(
        cfg,
        routing,
        prefix=tmp_path,
        web_root=tmp_path,
        worker_user=None,
        front=front,
        upstream_tls=upstream_tls(inv),
    )


def test_the_gateways_nginx_proxies_to_verified_https_upstreams_with_its_client_certificate(
    tmp_path: Path,
) -> None:
    ca = make_ca(tmp_path / "pki")
    client = ca.issue(tmp_path / "pki", "gateway", ["gateway"], client=True)
    data = {"hosts": TLS_HOSTS, "tls_ca": str(ca.cert), "tls_name": "replicas.hs.internal"}
    inv = parse_inventory({**data, "tls_cert": str(client.cert), "tls_key": str(client.key)}, "i", tmp_path)
    text = _gateway_conf(tmp_path, inv)
    for line in (
        "proxy_pass https://hs_replicas;",
        "proxy_ssl_protocols TLSv1.2 TLSv1.3;",
        "proxy_ssl_session_reuse on;",
        "proxy_ssl_verify on;",
        f"proxy_ssl_trusted_certificate {ca.cert};",
        "proxy_ssl_name replicas.hs.internal;",
        "proxy_ssl_server_name on;",
        f"proxy_ssl_certificate {client.cert};",
        f"proxy_ssl_certificate_key {client.key};",
    ):
        assert f"    {line}\n" in text, line
    assert "proxy_pass http://" not in text and "keepalive 32;" in text
    if NGINX is not None:  # the real Nginx reads the files and takes every directive
        checked = nginx_t(tmp_path, text)
        assert checked.returncode == 0, checked.stderr


def test_plain_configs_have_no_tls_lines_and_a_tls_host_reaches_its_own_replicas_unverified(
    tmp_path: Path,
) -> None:
    plain = parse_inventory({"hosts": [{"name": "a", "url": "http://127.0.0.1:80"}]}, "i", tmp_path)
    text = _gateway_conf(tmp_path, plain)
    assert "proxy_ssl" not in text and "proxy_pass https" not in text
    routing = Routing((UpstreamServer("10.77.0.2:8101", False, "r0"),))
    host = build_config({"replica": {"host": "10.77.0.2", "tls_cert": "/r.crt", "tls_key": "/r.key"}}, {})
    text = render_nginx(host, routing, prefix=tmp_path, web_root=tmp_path, worker_user=None)
    assert "proxy_pass https://hs_replicas;" in text and "    proxy_ssl_verify off;\n" in text
    assert "proxy_ssl_certificate" not in text and '"tls":true' in text  # the listing says so


def test_a_replica_exempts_only_callers_on_its_own_host() -> None:
    assert from_this_host("127.0.0.1", "10.77.0.2") and from_this_host("::1", "::1")
    assert from_this_host("10.77.0.2", "10.77.0.2")
    assert not from_this_host("10.77.0.1", "10.77.0.2") and not from_this_host("bogus", "bogus")
    head, body = refusal().split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 403 ") and b"content-length: %d" % len(body) in head
    assert b'"client_certificate_required"' in body


@contextlib.contextmanager
def _plain_http(port: int) -> Iterator[None]:
    """A plain HTTP server on loopback that answers anything with a 400 (what Nginx says to a TLS hello)."""
    loop = asyncio.new_event_loop()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = loop.run_until_complete(asyncio.start_server(answer, "127.0.0.1", port))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        server.close()
        loop.close()


def test_an_https_host_serving_plain_http_is_refused_at_start_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca = make_ca(tmp_path / "pki")
    port = free_port()
    data = {"hosts": [{"name": "gpu-a", "url": f"https://127.0.0.1:{port}"}], "tls_ca": str(ca.cert)}
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({**data, "tls_name": "replicas.hs.internal"}))
    inv = load_inventory(path)
    with _plain_http(port):
        discovery = HttpDiscovery(2.0, tls=client_context(inv))
        with pytest.raises(DiscoveryError) as err:
            asyncio.run(discovery.fetch(inv.hosts[0].url))
        asyncio.run(discovery.aclose())
        assert err.value.tls and "it answers in plain HTTP" in str(err.value), err.value
        run_dir = tmp_path / "run"
        assert main(["gateway", "--inventory", str(path), "--run-dir", str(run_dir)]) == 1
    message = capsys.readouterr().err
    assert f"cannot start: host gpu-a (https://127.0.0.1:{port}): TLS handshake failed" in message, message
    assert not run_dir.exists()  # nothing half-started


def test_a_client_key_others_may_read_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca = make_ca(tmp_path / "pki")
    client = ca.issue(tmp_path / "pki", "gateway", ["gateway"], client=True)
    client.key.chmod(0o644)
    path = tmp_path / "inventory.yaml"
    data = {"hosts": TLS_HOSTS, "tls_ca": str(ca.cert), "tls_name": "r.hs"}
    path.write_text(yaml.safe_dump({**data, "tls_cert": str(client.cert), "tls_key": str(client.key)}))
    run_dir = tmp_path / "run"
    assert main(["gateway", "--inventory", str(path), "--run-dir", str(run_dir)]) == 2
    message = capsys.readouterr().err
    assert f"tls_key {client.key} has mode 0644: others may read it; run: chmod 600" in message, message
    assert not run_dir.exists()


def test_a_secret_for_a_plain_non_loopback_host_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "peer.secret").write_text("s" * 32)
    (tmp_path / "peer.secret").chmod(0o600)
    path = tmp_path / "inventory.yaml"
    hosts = [{"name": "gpu-a", "url": "http://10.77.0.2:8080"}]
    path.write_text(yaml.safe_dump({"peer_secret_file": "peer.secret", "hosts": hosts}))
    run_dir = tmp_path / "run"
    assert main(["gateway", "--inventory", str(path), "--run-dir", str(run_dir)]) == 2
    message = capsys.readouterr().err
    assert "hosts[0] (gpu-a): the peer secret would cross the network in plain HTTP to 10.77.0.2" in message
    assert not run_dir.exists()


def test_a_front_pair_that_does_not_hold_is_refused_before_any_host_is_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca = make_ca(tmp_path / "pki")
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
    old = ca.issue(tmp_path / "pki", "front", not_before=past - datetime.timedelta(days=30), not_after=past)
    path = tmp_path / "inventory.yaml"
    nginx = {"tls_cert": str(old.cert), "tls_key": str(old.key)}
    # No host answers at this address: a refusal naming the pair shows it was checked first.
    hosts = [{"name": "a", "url": f"http://127.0.0.1:{free_port()}"}]
    path.write_text(yaml.safe_dump({"hosts": hosts, "nginx": nginx}))
    run_dir = tmp_path / "run"
    assert main(["gateway", "--inventory", str(path), "--run-dir", str(run_dir)]) == 1
    message = capsys.readouterr().err
    assert "cannot start" in message and f"nginx.tls_cert {old.cert}" in message and "expired" in message, (
        message
    )
    assert not run_dir.exists()

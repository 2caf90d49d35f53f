"""The peer secret: its file, the replica's check, a host's Nginx asking for it, a gateway's sending it."""

# The real Nginx, small real upstreams behind the real check.

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from hunyuan_serve import auth
from hunyuan_serve.config import ConfigError, build_config
from hunyuan_serve.edge import dialects
from hunyuan_serve.edge.controller import NginxController
from hunyuan_serve.edge.layout import GatewayFront
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.run.health import State
from hunyuan_serve.run.rundir import worker_user
from tests.support.edge import upstreams
from tests.support.stacks import free_port

SECRET = "peer-secret-0123456789abcdef"
NGINX = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed")


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "peer.secret"
    path.write_text(SECRET + "\n")
    return path


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (None, "cannot read"),
        ("", "is empty"),
        (" \n\n", "is empty"),
        ("short\n", "16 or more"),
        ("has a space in it 0123456789\n", "16 or more"),
        ('quote"0123456789abcdef', "16 or more"),
    ],
)
def test_a_secret_file_that_cannot_be_used_is_a_config_error_naming_it(
    tmp_path: Path, text: str | None, problem: str
) -> None:
    path = tmp_path / "peer.secret"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError, match=problem) as err:
        auth.load_peer_secret(str(path))
    assert str(path) in str(err.value) and "auth.peer_secret_file" in str(err.value)


def test_the_secret_is_the_file_without_its_trailing_newline(secret_file: Path) -> None:
    assert auth.load_peer_secret(str(secret_file)) == SECRET
    cfg = build_config({"auth": {"peer_secret_file": str(secret_file)}}, {})
    assert auth.peer_headers(cfg.auth) == {"X-Hunyuan-Peer": SECRET}
    assert auth.peer_headers(build_config({}, {}).auth) == {}


def test_a_private_replica_address_needs_the_secret(secret_file: Path) -> None:
    def problem(peers: bool = True, **sections: Any) -> str | None:
        return auth.open_listen_problem(build_config(dict(sections), {}), peer_guards_listen=peers)

    assert "replica.host 10.77.0.2 is not loopback" in str(problem(replica={"host": "10.77.0.2"}))
    assert problem(replica={"host": "10.77.0.2"}, auth={"allow_open": True}) is None
    secret = {"peer_secret_file": str(secret_file)}
    assert problem(replica={"host": "10.77.0.2"}, nginx={"listen": "10.77.0.2"}, auth=secret) is None
    # A gateway's public front is not guarded by the secret it sends to the hosts.
    assert "nginx.listen 0.0.0.0 is not loopback" in str(
        problem(False, nginx={"listen": "0.0.0.0"}, auth=secret)
    )
    missing = {"peer_secret_file": str(secret_file.with_name("none"))}
    assert "cannot read" in str(problem(auth=missing))


def _echo(scope: Scope) -> dict[str, Any]:
    return {"path": scope["path"], "peer": dict(scope["headers"]).get(b"x-hunyuan-peer", b"").decode()}


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    import json

    body = json.dumps(_echo(scope)).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": body})


# Each dialect's 403 shape, from the one table (edge.dialects.DIALECTS).
SHAPES = {
    "/translate": {"error": {"code": "peer_refused", "message": dialects.PEER_REFUSED}},
    "/health": {"error": {"code": "peer_refused", "message": dialects.PEER_REFUSED}},
    "/v1/chat/completions": {
        "error": {
            "message": dialects.PEER_REFUSED,
            "type": "invalid_request_error",
            "param": None,
            "code": "peer_refused",
        }
    },
    "/libretranslate/translate": {"error": dialects.PEER_REFUSED},
    "/v2/translate": {"message": dialects.PEER_REFUSED},
}


async def test_the_replica_check_refuses_without_the_secret_in_each_dialect() -> None:
    app = auth.PeerCheck(_app, SECRET)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://r") as client:
        for path, shape in SHAPES.items():
            for headers in ({}, {"X-Hunyuan-Peer": SECRET[:-1] + "x"}, {"X-Hunyuan-Peer": ""}):
                refused = await client.post(path, headers=headers)
                assert (refused.status_code, refused.json()) == (403, shape), (path, headers)
            passed = await client.post(path, headers={"X-Hunyuan-Peer": SECRET})
            assert passed.status_code == 200 and passed.json()["path"] == path


@NGINX
async def test_a_hosts_nginx_asks_for_the_secret_and_sends_it_to_its_replicas(
    tmp_path: Path, secret_file: Path
) -> None:
    port = free_port()
    cfg = build_config(
        {"nginx": {"port": port, "worker_processes": 1}, "auth": {"peer_secret_file": str(secret_file)}}, {}
    )
    with upstreams(1, keys=False) as (script, ports):
        nginx = NginxController(cfg.nginx, tmp_path / "nginx", headers=auth.peer_headers(cfg.auth))
        web = tmp_path / "web"
        web.mkdir()

        def conf(generation: int) -> str:
            routing = routing_from_states([(f"127.0.0.1:{ports[0]}", State.READY)], ["replica-0"])
            return render_nginx(
                cfg,
                routing,
                prefix=nginx.prefix,
                web_root=web,
                worker_user=worker_user(),
                generation=generation,
            )

        await nginx.start(conf(1), tmp_path / "nginx.log")
        assert SECRET in (nginx.prefix / "nginx.conf").read_text()
        assert nginx.prefix.stat().st_mode & 0o077 == 0  # so only this user reads it
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as client:
                for path, shape in SHAPES.items():
                    for headers in ({}, {"X-Hunyuan-Peer": "wrong-secret-0123456789"}):
                        refused = await client.post(path, headers=headers)
                        assert (refused.status_code, refused.json()) == (403, shape), (path, headers)
                listing = await client.get("/_hs/replicas")
                assert listing.status_code == 403
                assert script.seen == []  # nothing refused got to a replica
                ok = {"X-Hunyuan-Peer": SECRET}
                passed = await client.post("/translate", headers=ok, json={})
                assert passed.status_code == 200
                assert script.seen[-1]["headers"]["x-hunyuan-peer"] == SECRET
                listing = await client.get("/_hs/replicas", headers=ok)
                assert listing.json() == {
                    "model": "",
                    "family": None,
                    "config": 1,
                    "replicas": [{"name": "replica-0", "addr": f"127.0.0.1:{ports[0]}", "ready": True}],
                }
                # The controller's own checks carry the secret: a reload is confirmed by /health.
                await nginx.reload(conf(2), 2)
                health = await client.get("/health", headers=ok)
                assert health.json()["config"] == 2
        finally:
            await nginx.stop(5.0)


@NGINX
async def test_a_gateways_nginx_sends_the_secret_and_asks_its_clients_for_none(
    tmp_path: Path, secret_file: Path
) -> None:
    port = free_port()
    inventory = {
        "nginx": {"port": port, "worker_processes": 1},
        "auth": {"peer_secret_file": str(secret_file)},
    }
    cfg = build_config(inventory, {})
    with upstreams(2, keys=False) as (script, ports):
        nginx = NginxController(cfg.nginx, tmp_path / "nginx")
        web = tmp_path / "web"
        web.mkdir()
        routing = routing_from_states(
            [(f"127.0.0.1:{p}", State.READY) for p in ports], ["a/replica-0", "b/replica-0"]
        )
        hosts = {
            "a": {"state": "up", "ready": 1, "replicas": 1},
            "b": {"state": "up", "ready": 1, "replicas": 1},
        }
        front = GatewayFront("tiny-mt", "hunyuan-mt", hosts)
        text = render_nginx(
            cfg,
            routing,
            prefix=nginx.prefix,
            web_root=web,
            worker_user=worker_user(),
            generation=3,
            front=front,
        )
        assert "/_hs/replicas" not in text
        await nginx.start(text, tmp_path / "nginx.log")
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as client:
                health = await client.get("/health")
                assert health.json() == {
                    "status": "ready",
                    "model": "tiny-mt",
                    "family": "hunyuan-mt",
                    "ready": 2,
                    "replicas": 2,
                    "config": 3,
                    "hosts": hosts,
                }
                for _ in range(4):
                    assert (await client.post("/translate", json={})).status_code == 200
        finally:
            await nginx.stop(5.0)
    assert {seen["headers"]["x-hunyuan-peer"] for seen in script.seen} == {SECRET}
    assert {seen["port"] for seen in script.seen} == set(ports)

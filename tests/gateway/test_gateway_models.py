"""The gateway in front of hosts serving different models: one pool per model, each model to its hosts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from bench.pool_stubs import Stub, stub_servers
from hunyuan_serve.config import GatewayConfig, NginxConfig, build_config
from hunyuan_serve.edge.controller import NginxController
from hunyuan_serve.edge.layout import model_pool
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.gateway.hosts import Fleet, parse_listing
from hunyuan_serve.gateway.inventory import parse_inventory
from hunyuan_serve.run.rundir import worker_user
from tests.support.stacks import free_port

MT, SMALL = "tencent/Hunyuan-MT-7B", "tencent/HY-MT1.5-1.8B"


def host_listing(model: str, *ports: int, pools: dict[str, str] | None = None) -> dict[str, Any]:
    """What a host's /_hs/replicas says: one pool (model), or several (each replica names its pool)."""
    names = list(pools or {}) or ["default"]
    replicas = [
        {"name": f"replica-{i}", "addr": f"127.0.0.1:{p}", "ready": True, "pool": names[i % len(names)]}
        for i, p in enumerate(ports)
    ]
    return {
        "model": model,
        "family": None,
        "config": 1,
        "replicas": replicas,
        **({"pools": pools} if pools else {}),
    }


def fleet_of(listings: dict[str, dict[str, Any]], tmp_path: Path, gw: dict[str, Any] | None = None) -> Fleet:
    """A fleet that has listed every host and probed every replica ready."""
    hosts = [{"name": name, "url": f"http://10.0.0.{i + 1}:8080"} for i, name in enumerate(listings)]
    inventory = parse_inventory({"hosts": hosts, "gateway": gw or {}}, "test.yaml", tmp_path)
    fleet = Fleet(inventory.hosts, GatewayConfig(**(gw or {})), 0.0)
    for name, data in listings.items():
        listed = parse_listing(data)
        fleet.listed(name, listed, 0.0)
        for replica in listed.replicas:
            fleet.probed(name, replica.addr, True, "200", 1.0, 0.1)
    return fleet


def test_each_model_gets_its_own_pool_of_the_hosts_serving_it(tmp_path: Path) -> None:
    listings = {"a": host_listing(MT, 8101), "b": host_listing(SMALL, 8201), "c": host_listing(MT, 8301)}
    fleet = fleet_of(listings, tmp_path)
    assert fleet.served() == {model_pool(MT): MT, model_pool(SMALL): SMALL}
    pools = {k: [s.addr for s in v] for k, v in fleet.routing().pools().items()}
    assert pools == {
        model_pool(MT): ["127.0.0.1:8101", "127.0.0.1:8301"],
        model_pool(SMALL): ["127.0.0.1:8201"],
    }
    text = render_nginx(
        build_config({}, {}),
        fleet.routing(),
        prefix=tmp_path,
        web_root=tmp_path,
        worker_user=None,
        front=fleet.front(),
    )
    assert (
        f"upstream hs_pool_{model_pool(MT)} {{" in text and f"upstream hs_pool_{model_pool(SMALL)} {{" in text
    )
    health = text[text.index("location = /health") :].split("return 200 '", 1)[1].split("';", 1)[0]
    body = json.loads(health)
    assert body["model"] == MT and set(body["hosts"]) == {"a", "b", "c"} and len(body["pools"]) == 2


def test_gateway_model_still_routes_only_that_model(tmp_path: Path) -> None:
    listings = {"a": host_listing(MT, 8101), "b": host_listing(SMALL, 8201)}
    fleet = fleet_of(listings, tmp_path, {"model": MT})
    assert fleet.served() == {model_pool(MT): MT}
    down = {s.addr: s.down for s in fleet.routing().servers}
    assert down == {"127.0.0.1:8101": False, "127.0.0.1:8201": True}
    text = render_nginx(
        build_config({}, {}),
        fleet.routing(),
        prefix=tmp_path,
        web_root=tmp_path,
        worker_user=None,
        front=fleet.front(),
    )
    assert "js_" not in text and "upstream hs_replicas {" in text  # one model: the config as always


def test_a_host_of_several_pools_splits_its_replicas_by_model(tmp_path: Path) -> None:
    both = host_listing(MT, 8101, 8102, pools={"mt": MT, "small": SMALL})
    fleet = fleet_of({"a": both, "b": host_listing(SMALL, 8201)}, tmp_path)
    pools = {k: [s.addr for s in v] for k, v in fleet.routing().pools().items()}
    assert pools == {
        model_pool(MT): ["127.0.0.1:8101"],
        model_pool(SMALL): ["127.0.0.1:8102", "127.0.0.1:8201"],
    }


@pytest.mark.nginx
@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed")
@pytest.mark.skipif(not Path(NginxConfig().js_module).exists(), reason="njs not installed")
async def test_through_the_gateways_nginx_each_model_reaches_its_host(tmp_path: Path) -> None:
    port = free_port()
    with stub_servers([Stub("a", MT), Stub("b", SMALL)]) as (a, b):
        fleet = fleet_of({"a": host_listing(MT, a.port), "b": host_listing(SMALL, b.port)}, tmp_path)
        cfg = build_config({"nginx": {"port": port, "worker_processes": 1}}, {})
        nginx = NginxController(cfg.nginx, tmp_path / "nginx")
        text = render_nginx(
            cfg,
            fleet.routing(),
            prefix=nginx.prefix,
            web_root=tmp_path,
            worker_user=worker_user(),
            front=fleet.front(),
        )
        await nginx.start(text, tmp_path / "nginx.log")
        try:
            http = httpx.AsyncClient(trust_env=False, timeout=30)
            api = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", http_client=http)
            for model, host in ((MT, "a"), (SMALL, "b"), (MT, "a")):
                chat = await api.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": "hi"}]
                )
                assert chat.model == model and chat.choices[0].message.content == f"pool {host}"
            assert [m.id for m in (await api.models.list()).data] == [MT, SMALL]
            with pytest.raises(openai.NotFoundError):
                await api.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])
            await api.close()
        finally:
            await nginx.stop(5.0)

"""`render k8s` with two pools: each pool's replica pods, one front routing by model, validated strictly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hunyuan_serve.edge.layout import route_script
from hunyuan_serve.k8s.manifests import NGINX_CONF_DIR
from tests.support.edge import NGINX, nginx_t
from tests.support.kube import Doc, build, configmap_of, container, of_kind, render, validate

JS_MODULE = Path("/usr/lib/nginx/modules/ngx_http_js_module.so")
CONFIG = {
    "pools": [
        {"name": "mt", "model": "/models/Hunyuan-MT-7B", "replicas": 2},
        {"name": "chimera", "model": "/models/Hunyuan-MT-Chimera-7B", "engine": {"max_num_seqs": 8}},
    ],
    "engine": {"device": "cpu"},
    "nginx": {"dialect_pool": "mt"},
}


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> list[Doc]:
    work = tmp_path_factory.mktemp("pools")
    (work / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    return build(render(work / "base", "--config", str(work / "config.yaml"), "--allow-open"))


def front_files(docs: list[Doc]) -> dict[str, str]:
    data: dict[str, str] = configmap_of(
        docs, of_kind(docs, "Deployment")["hunyuan-serve-front"], "nginx-conf"
    )["data"]
    return data


def test_two_pools_render_their_pods_and_pass_strict_validation(two: list[Doc]) -> None:
    validate(two)
    deployments = sorted(of_kind(two, "Deployment"))
    assert deployments == [
        "hunyuan-serve-chimera-replica-0",
        "hunyuan-serve-front",
        "hunyuan-serve-mt-replica-0",
        "hunyuan-serve-mt-replica-1",
    ]
    # Each pod reads its own pool's config: its model, and served under that name.
    for name, model in (("mt-replica-1", "Hunyuan-MT-7B"), ("chimera-replica-0", "Hunyuan-MT-Chimera-7B")):
        deployment = of_kind(two, "Deployment")[f"hunyuan-serve-{name}"]
        argv = container(deployment)["command"] + container(deployment).get("args", [])
        config_file = argv[argv.index("--config") + 1].rsplit("/", 1)[1]
        assert config_file == f"{name}.yaml"
        replica = yaml.safe_load(configmap_of(two, deployment, "config")["data"][config_file])
        assert replica["engine"]["served_model_name"] == model  # the checkpoint's directory name
        assert "pools" not in replica or not replica["pools"]


def test_the_front_routes_each_model_to_its_pools_services(two: list[Doc]) -> None:
    files = front_files(two)
    conf = files["nginx.conf"]
    assert files["route.js"] == route_script().read_text(encoding="utf-8")
    assert f'js_import hs from "{NGINX_CONF_DIR}/route.js";' in conf
    mt = conf[conf.index("upstream hs_pool_mt {") :].split("}", 1)[0]
    chimera = conf[conf.index("upstream hs_pool_chimera {") :].split("}", 1)[0]
    assert "server hunyuan-serve-mt-replica-0:8101 " in mt and "server hunyuan-serve-mt-replica-1:8102 " in mt
    # Each pool's cap per replica: what its replicas run and let wait (max_in_flight + max_queued).
    assert "server hunyuan-serve-chimera-replica-0:8101 " in chimera and "max_conns=2304;" in chimera
    routes = conf[conf.index("js_var $hs_routes '") + len("js_var $hs_routes '") :].split("';", 1)[0]
    table = json.loads(routes)
    assert table["models"] == {
        "Hunyuan-MT-7B": "@hs_pool_mt",
        "Hunyuan-MT-Chimera-7B": "@hs_pool_chimera",
    }
    assert "listen 0.0.0.0:8080;" in conf


@pytest.mark.nginx
@pytest.mark.skipif(NGINX is None or not JS_MODULE.exists(), reason="nginx with njs is not installed")
def test_the_fronts_config_passes_nginx_t(two: list[Doc], tmp_path: Path) -> None:
    files = front_files(two)
    (tmp_path / "route.js").write_text(files["route.js"])
    # The ConfigMap's text, with its two paths that only exist in the pod pointed here: the script's
    # directory, and the Services' names (cluster DNS) as the addresses of this machine.
    conf = files["nginx.conf"].replace(f"{NGINX_CONF_DIR}/route.js", str(tmp_path / "route.js"))
    for name in of_kind(two, "Service"):
        conf = conf.replace(f"server {name}:", "server 127.0.0.1:")
    conf = conf.replace("/run/hunyuan-serve/nginx", str(tmp_path))
    done = nginx_t(tmp_path, conf)
    assert done.returncode == 0, done.stderr

"""The files of the kustomize base: kustomization.yaml, the resources, the generated ConfigMaps' files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from hunyuan_serve.config import ServeConfig, config_to_yaml
from hunyuan_serve.edge.layout import route_script
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.k8s.front import front_deployment, front_service
from hunyuan_serve.k8s.manifests import (
    NGINX_CONF_DIR,
    NGINX_CONFIGMAP,
    NGINX_PREFIX,
    REPLICA_CONFIGMAP,
    TLS_DIR,
    WEB_CONFIGMAP,
    WEB_ROOT,
    Doc,
    PodOptions,
    labels,
    replica_deployment,
    replica_network_policy,
    replica_pdb,
    service,
)
from hunyuan_serve.k8s.pools import PodPlan, front_config, front_pools, front_routing

KUSTOMIZATION = "kustomization.yaml"
HEADER = (
    "# Rendered by `hunyuan-serve render k8s`; rendering again replaces these files (edit in an overlay).\n"
)


def dump(docs: Sequence[Doc]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, allow_unicode=True)


def front_nginx_conf(pools: list[PodPlan], cfg: ServeConfig | None = None, tls_dir: str | None = None) -> str:
    """up's nginx.conf, from the same template, with every pool's Service as an upstream server (with
    several config pools, one upstream each and route.js from the same ConfigMap); with tls_dir, TLS
    from the Secret mounted there."""
    prefix, web_root = Path(NGINX_PREFIX), Path(WEB_ROOT)
    front, routing = front_config(pools, cfg, tls_dir), front_routing(pools)
    if len(front.pools) < 2:
        return render_nginx(front, routing, prefix=prefix, web_root=web_root, worker_user=None)
    script = Path(NGINX_CONF_DIR) / "route.js"
    return render_nginx(
        front,
        routing,
        prefix=prefix,
        web_root=web_root,
        worker_user=None,
        pools=front_pools(pools),
        script=script,
    )


def kustomization(namespace: str, generated: Mapping[str, Sequence[str]], resources: Sequence[str]) -> Doc:
    """Names the resources and generates the ConfigMaps (kustomize hashes their content into the name and
    rewrites the pods' references, so a changed config rolls the pods that read it)."""
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": namespace,
        "resources": list(resources),
        "generatorOptions": {"labels": labels("config")},
        "configMapGenerator": [{"name": name, "files": list(files)} for name, files in generated.items()],
    }


def render_base(
    pools: list[PodPlan],
    opts: PodOptions,
    namespace: str,
    web: Mapping[str, str],
    cfg: ServeConfig | None = None,
) -> dict[str, str]:
    """Relative path -> text of every file of the base; web maps the page's file names to their text;
    cfg: the whole config, whose `pools` (several) the front routes between by model."""
    files: dict[str, str] = {}
    config_keys = []
    for pool in pools:
        path = f"config/{pool.plan.config_path.name}"
        files[path] = config_to_yaml(pool.config)
        config_keys.append(f"{pool.plan.config_path.name}={path}")
    tls_dir = TLS_DIR if opts.tls_secret else None
    files["nginx/nginx.conf"] = front_nginx_conf(pools, cfg, tls_dir)
    nginx_files = ["nginx.conf=nginx/nginx.conf"]
    if len(front_config(pools, cfg).pools) > 1:
        files["nginx/route.js"] = route_script().read_text(encoding="utf-8")
        nginx_files.append("route.js=nginx/route.js")
    for name, text in sorted(web.items()):
        files[f"web/{name}"] = text
    replicas: list[Doc] = []
    for pool in pools:
        replicas += [replica_deployment(pool, opts), service(pool.name, "replica", pool.plan.port, pool)]
    files["replicas.yaml"] = dump([*replicas, replica_pdb(), replica_network_policy()])
    front = front_config(pools, cfg, tls_dir)
    files["front.yaml"] = dump([front_deployment(front, opts), front_service(front)])
    generated: dict[str, list[str]] = {
        REPLICA_CONFIGMAP: config_keys,
        NGINX_CONFIGMAP: nginx_files,
        WEB_CONFIGMAP: [f"{name}=web/{name}" for name in sorted(web)],
    }
    files[KUSTOMIZATION] = HEADER + dump(
        [kustomization(namespace, generated, ["replicas.yaml", "front.yaml"])]
    )
    return files


def referenced_files(kustomization_text: str) -> set[str]:
    """The files a rendered kustomization.yaml names (resources and generator files), itself included."""
    data: Any = yaml.safe_load(kustomization_text) or {}
    names = {KUSTOMIZATION, *data.get("resources", [])}
    for generator in data.get("configMapGenerator", []):
        names.update(entry.split("=", 1)[-1] for entry in generator.get("files", []))
    return names

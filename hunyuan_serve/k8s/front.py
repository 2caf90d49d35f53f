"""The front Nginx on Kubernetes: its Deployment and Service, running the nginx.conf `up` renders; pure."""

from __future__ import annotations

from typing import Any

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.k8s.manifests import (
    NGINX_CONF_DIR,
    NGINX_CONFIGMAP,
    NGINX_PREFIX,
    WEB_CONFIGMAP,
    WEB_ROOT,
    Doc,
    PodOptions,
    front_grace_s,
    http_probe,
    labels,
    meta,
    seconds,
    service,
)
from hunyuan_serve.k8s.pools import NAME

FRONT = f"{NAME}-front"  # the Deployment; its Service is plain NAME, the address clients use


def front_volumes() -> tuple[list[Doc], list[Doc]]:
    """(volumes, mounts): nginx.conf and the web page from ConfigMaps; the prefix (pid), logs/ and
    temp/ that the rendered config names, each an emptyDir."""
    volumes: list[Doc] = [
        {"name": "nginx-conf", "configMap": {"name": NGINX_CONFIGMAP}},
        {"name": "web", "configMap": {"name": WEB_CONFIGMAP}},
        {"name": "nginx-run", "emptyDir": {}},
        {"name": "nginx-logs", "emptyDir": {}},
        {"name": "nginx-temp", "emptyDir": {}},
    ]
    mounts: list[Doc] = [
        {"name": "nginx-conf", "mountPath": NGINX_CONF_DIR, "readOnly": True},
        {"name": "web", "mountPath": WEB_ROOT, "readOnly": True},
        {"name": "nginx-run", "mountPath": NGINX_PREFIX},
        {"name": "nginx-logs", "mountPath": f"{NGINX_PREFIX}/logs"},
        {"name": "nginx-temp", "mountPath": f"{NGINX_PREFIX}/temp"},
    ]
    return volumes, mounts


def front_container(cfg: ServeConfig, opts: PodOptions, mounts: list[Doc]) -> Doc:
    """Nginx in the foreground (the config says daemon off); errors before it is read go to stderr."""
    sup = cfg.supervisor
    period, timeout = seconds(sup.probe_interval_s), seconds(sup.probe_timeout_s)
    conf = f"{NGINX_CONF_DIR}/nginx.conf"
    probe: dict[str, Any] = {"tcpSocket": {"port": "http"}, "periodSeconds": period}
    return {
        "name": "nginx",
        "image": opts.nginx_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["nginx", "-p", NGINX_PREFIX, "-c", conf, "-e", "stderr"],
        "ports": [{"name": "http", "containerPort": cfg.nginx.port, "protocol": "TCP"}],
        "readinessProbe": http_probe("/health", period, timeout, sup.unhealthy_threshold),
        "livenessProbe": probe | {"timeoutSeconds": timeout, "failureThreshold": sup.unhealthy_threshold},
        "volumeMounts": mounts,
    }


def front_deployment(cfg: ServeConfig, opts: PodOptions) -> Doc:
    volumes, mounts = front_volumes()
    spec: Doc = {
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": front_grace_s(cfg),
        "containers": [front_container(cfg, opts, mounts)],
        "volumes": volumes,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(FRONT, "front"),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels("front")},
            "template": {"metadata": {"labels": labels("front")}, "spec": spec},
        },
    }


def front_service(cfg: ServeConfig) -> Doc:
    """The address clients use: http://hunyuan-serve.NAMESPACE:PORT inside the cluster."""
    return service(NAME, "front", cfg.nginx.port)

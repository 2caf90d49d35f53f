"""The front Nginx on Kubernetes: its Deployment and Service, running the nginx.conf `up` renders; pure."""

from __future__ import annotations

from typing import Any

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.k8s.manifests import (
    NGINX_CONF_DIR,
    NGINX_CONFIGMAP,
    NGINX_PREFIX,
    TLS_DIR,
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
# The front image's Nginx runs as nginx-front (deploy/container/front.Containerfile, uid and gid 10002):
# the TLS Secret's files are given that group, readable by it and their owner only.
FRONT_GID = 10002
TLS_MODE = 0o440


def front_volumes(tls_secret: str | None = None) -> tuple[list[Doc], list[Doc]]:
    """(volumes, mounts): nginx.conf and the web page from ConfigMaps; the prefix (pid), logs/ and
    temp/ that the rendered config names, each an emptyDir; with tls_secret, its pair at TLS_DIR."""
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
    if tls_secret:
        volumes.append({"name": "tls", "secret": {"secretName": tls_secret, "defaultMode": TLS_MODE}})
        mounts.append({"name": "tls", "mountPath": TLS_DIR, "readOnly": True})
    return volumes, mounts


def front_ports(cfg: ServeConfig) -> list[tuple[str, int]]:
    """(name, port) the front serves: the plain port (unless plain_http off closes it to the pod's
    network), and the TLS port when nginx.tls_cert is set."""
    nginx = cfg.nginx
    if not nginx.tls_cert:
        return [("http", nginx.port)]
    plain = [] if nginx.plain_http == "off" else [("http", nginx.port)]
    return [*plain, ("https", nginx.tls_port)]


def front_container(cfg: ServeConfig, opts: PodOptions, mounts: list[Doc]) -> Doc:
    """Nginx in the foreground (the config says daemon off); errors before it is read go to stderr."""
    sup = cfg.supervisor
    period, timeout = seconds(sup.probe_interval_s), seconds(sup.probe_timeout_s)
    conf = f"{NGINX_CONF_DIR}/nginx.conf"
    tls = bool(cfg.nginx.tls_cert)
    probe: dict[str, Any] = {"tcpSocket": {"port": "https" if tls else "http"}, "periodSeconds": period}
    ports = [{"name": name, "containerPort": port, "protocol": "TCP"} for name, port in front_ports(cfg)]
    return {
        "name": "nginx",
        "image": opts.nginx_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["nginx", "-p", NGINX_PREFIX, "-c", conf, "-e", "stderr"],
        "ports": ports,
        "readinessProbe": http_probe("/health", period, timeout, sup.unhealthy_threshold, tls=tls),
        "livenessProbe": probe | {"timeoutSeconds": timeout, "failureThreshold": sup.unhealthy_threshold},
        "volumeMounts": mounts,
    }


def front_deployment(cfg: ServeConfig, opts: PodOptions) -> Doc:
    volumes, mounts = front_volumes(opts.tls_secret)
    spec: Doc = {
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": front_grace_s(cfg),
        "containers": [front_container(cfg, opts, mounts)],
        "volumes": volumes,
    }
    if opts.tls_secret:
        spec["securityContext"] = {"fsGroup": FRONT_GID}
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
    """The address clients use: http://hunyuan-serve.NAMESPACE:PORT inside the cluster (and
    https://hunyuan-serve.NAMESPACE:TLS_PORT with the TLS Secret)."""
    doc = service(NAME, "front", cfg.nginx.port)
    doc["spec"]["ports"] = [
        {"name": name, "port": port, "targetPort": name, "protocol": "TCP"} for name, port in front_ports(cfg)
    ]
    return doc

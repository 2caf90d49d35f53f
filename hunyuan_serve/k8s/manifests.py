"""The Kubernetes objects of the base, built as plain dicts from the pools and the config; pure."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.gpu import CUDA_ENV
from hunyuan_serve.k8s.command import replica_image
from hunyuan_serve.k8s.pools import CONFIG_DIR, NAME, PodPlan
from hunyuan_serve.replica.engine import variables

Doc = dict[str, Any]

REPLICA_CONFIGMAP = f"{NAME}-replica-config"  # kustomize adds a content hash, so a change rolls the pods
NGINX_CONFIGMAP = f"{NAME}-nginx"
WEB_CONFIGMAP = f"{NAME}-web"
KEYS_SECRET = f"{NAME}-keys"  # the user's (`kubectl create secret`); keys are never rendered
KEYS_SECRET_KEY = "keys.txt"
HF_SECRET = f"{NAME}-hf"  # optional: key HF_TOKEN, for gated or private hub models
HF_HOME = "/var/cache/huggingface"
# vLLM's, Inductor's and Triton's compile caches on an emptyDir: it outlives a container's restart in
# its pod, so a replica restarted by its liveness probe loads the compiled graphs instead of compiling.
COMPILE_CACHE = "/var/cache/hunyuan-serve/compile"
COMPILE_ENV = (
    (variables.CACHE_ROOT, f"{COMPILE_CACHE}/vllm"),
    ("TORCHINDUCTOR_CACHE_DIR", f"{COMPILE_CACHE}/inductor"),
    ("TRITON_CACHE_DIR", f"{COMPILE_CACHE}/triton"),
)
NGINX_CONF_DIR = "/etc/hunyuan-serve/nginx"
# Where the front pod mounts the TLS Secret: nginx.tls_cert and nginx.tls_key point at its two keys.
TLS_DIR = "/etc/hunyuan-serve/tls"
NGINX_PREFIX = "/run/hunyuan-serve/nginx"  # Nginx's pid, logs/ and temp/ (emptyDirs)
WEB_ROOT = "/usr/share/hunyuan-serve/web"
GPU_RESOURCE = "nvidia.com/gpu"
POOL_LABEL = f"{NAME}/pool"


@dataclass(frozen=True)
class PodOptions:
    """What Kubernetes needs beyond the config: images, pod sizes, where a model path comes from."""

    image: str | None  # None: this version's image of the pool's flavour (replica_image)
    nginx_image: str
    cpu: str
    memory: str
    model_pvc: str | None = None
    tls_secret: str | None = None  # a kubernetes.io/tls Secret: the front serves its pair (tls.crt, tls.key)


def labels(component: str, pool: PodPlan | None = None) -> dict[str, str]:
    """The one label set: every object has name and component; a replica pod also its pool."""
    found = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": component}
    return found | ({POOL_LABEL: pool.plan.name} if pool else {})


def meta(name: str, component: str, pool: PodPlan | None = None) -> Doc:
    return {"name": name, "labels": labels(component, pool)}


def seconds(value: float) -> int:
    """Kubernetes counts probes and grace periods in whole seconds, at least one."""
    return max(1, math.ceil(value))


def http_probe(path: str, period_s: int, timeout_s: int, failures: int, *, tls: bool = False) -> Doc:
    """kubelet's GET of path on the http port, or over TLS on the https port (kubelet verifies no
    certificate: the check is that Nginx answers there)."""
    get: Doc = {"path": path, "port": "https", "scheme": "HTTPS"} if tls else {"path": path, "port": "http"}
    return {
        "httpGet": get,
        "periodSeconds": period_s,
        "timeoutSeconds": timeout_s,
        "failureThreshold": failures,
    }


def deep_health_probe(port: int, period_s: int, timeout_s: int, failures: int) -> Doc:
    """The deep /health asked from inside the pod: the replica answers it to loopback callers only (it
    makes the engine generate), and kubelet's own httpGet comes from the node's address."""
    url = f"http://127.0.0.1:{port}/health?deep=1"
    return {
        "exec": {"command": ["curl", "-fsS", "-o", "/dev/null", "--max-time", str(timeout_s), url]},
        "periodSeconds": period_s,
        "timeoutSeconds": timeout_s,
        "failureThreshold": failures,
    }


def replica_probes(cfg: ServeConfig, port: int | None = None) -> Doc:
    """up's probing rules as kubelet's: startup has its own deadline, readiness is /health with the
    eviction threshold, liveness the deep probe (a one-token generation) at up's deep-probe cadence."""
    sup = cfg.supervisor
    period, timeout = seconds(sup.probe_interval_s), seconds(sup.probe_timeout_s)
    startup = http_probe("/health", period, timeout, max(1, math.ceil(sup.startup_timeout_s / period)))
    ready = http_probe("/health", period, timeout, sup.unhealthy_threshold)
    if sup.deep_probe_every:
        # The replica answers hung after health_deep_timeout_s; kubelet waits that long plus a probe's own.
        deep_timeout = seconds(cfg.replica.health_deep_timeout_s + sup.probe_timeout_s)
        deep_period = max(seconds(sup.probe_interval_s * sup.deep_probe_every), deep_timeout)
        live = deep_health_probe(port or cfg.replica.port, deep_period, deep_timeout, sup.unhealthy_threshold)
    else:  # deep probes off: the shallow /health still says hung (stall_timeout_s)
        live = http_probe("/health", period, timeout, sup.unhealthy_threshold)
    return {"startupProbe": startup, "readinessProbe": ready, "livenessProbe": live}


def replica_grace_s(cfg: ServeConfig) -> int:
    """SIGTERM to SIGKILL: the replica drains for graceful_shutdown_s, then gets kill_timeout_s to exit,
    as `up` gives it."""
    return seconds(cfg.replica.graceful_shutdown_s + cfg.supervisor.kill_timeout_s)


def front_grace_s(cfg: ServeConfig) -> int:
    """SIGQUIT (the Nginx image's stop signal: graceful) to SIGKILL: up's drain of in-flight requests."""
    return seconds(cfg.supervisor.drain_timeout_s + cfg.supervisor.kill_timeout_s)


def resources(pool: PodPlan, opts: PodOptions) -> Doc:
    """CPU and memory requests (memory also the limit); a GPU pool's pod also its nvidia.com/gpu."""
    requests: dict[str, Any] = {"cpu": opts.cpu, "memory": opts.memory}
    limits: dict[str, Any] = {"memory": opts.memory}
    if pool.gpus:
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = pool.gpus
    return {"requests": requests, "limits": limits}


def replica_env(pool: PodPlan) -> list[Doc]:
    """up's CUDA environment for a GPU replica (not CUDA_VISIBLE_DEVICES: the device plugin's), the hub
    cache, and an optional hub token from a Secret."""
    env: list[Doc] = [{"name": k, "value": v} for k, v in CUDA_ENV] if pool.gpus else []
    env.append({"name": "HF_HOME", "value": HF_HOME})
    env.extend({"name": k, "value": v} for k, v in COMPILE_ENV)
    token = {"secretKeyRef": {"name": HF_SECRET, "key": "HF_TOKEN", "optional": True}}
    env.append({"name": "HF_TOKEN", "valueFrom": token})
    return env


def mount_clashes(cfg: ServeConfig) -> list[str]:
    """Paths of the config that would land inside a directory the replica pod mounts for itself."""
    own = (CONFIG_DIR, PurePosixPath("/dev/shm"), PurePosixPath(HF_HOME), PurePosixPath(COMPILE_CACHE))
    asked = {
        "engine.model": cfg.engine.model if (cfg.engine.model or "").startswith("/") else None,
        "auth.keys_file": cfg.auth.keys_file,
        "replica.cache_path": cfg.replica.cache_path,
    }
    return [
        f"{key} {path} is inside {mine}, which the replica pods mount for their own use"
        for key, path in asked.items()
        if path
        for mine in own
        if PurePosixPath(path).is_relative_to(mine) or PurePosixPath(mine).is_relative_to(path)
    ]


def replica_volumes(cfg: ServeConfig, opts: PodOptions) -> tuple[list[Doc], list[Doc]]:
    """(volumes, mounts): the config, /dev/shm for the engine's workers, the hub cache, and as the
    config asks a model directory, the keys file and the cache file's directory."""
    volumes: list[Doc] = [
        {"name": "config", "configMap": {"name": REPLICA_CONFIGMAP}},
        {"name": "shm", "emptyDir": {"medium": "Memory"}},
        {"name": "hf-cache", "emptyDir": {}},
        {"name": "compile-cache", "emptyDir": {}},
    ]
    mounts: list[Doc] = [
        {"name": "config", "mountPath": str(CONFIG_DIR), "readOnly": True},
        {"name": "shm", "mountPath": "/dev/shm"},
        {"name": "hf-cache", "mountPath": HF_HOME},
        {"name": "compile-cache", "mountPath": COMPILE_CACHE},
    ]
    model = cfg.engine.model or ""
    if model.startswith("/"):
        source = (
            {"persistentVolumeClaim": {"claimName": opts.model_pvc, "readOnly": True}}
            if opts.model_pvc
            else {"hostPath": {"path": model, "type": "Directory"}}
        )
        volumes.append({"name": "model", **source})
        mounts.append({"name": "model", "mountPath": model, "readOnly": True})
    if cfg.auth.keys_file:
        volumes.append({"name": "keys", "secret": {"secretName": KEYS_SECRET}})
        path = cfg.auth.keys_file
        mounts.append({"name": "keys", "mountPath": path, "subPath": KEYS_SECRET_KEY, "readOnly": True})
    if cfg.replica.cache_path:
        volumes.append({"name": "cache", "emptyDir": {}})
        mounts.append({"name": "cache", "mountPath": str(PurePosixPath(cfg.replica.cache_path).parent)})
    return volumes, mounts


def replica_container(pool: PodPlan, opts: PodOptions, mounts: list[Doc]) -> Doc:
    """`up`'s replica process as a container: the same argv, its config from the ConfigMap."""
    return {
        "name": "replica",
        "image": opts.image or replica_image(pool.gpus > 0),
        "imagePullPolicy": "IfNotPresent",
        "command": list(pool.plan.argv),
        "env": replica_env(pool),
        "ports": [{"name": "http", "containerPort": pool.plan.port, "protocol": "TCP"}],
        "resources": resources(pool, opts),
        **replica_probes(pool.config, pool.plan.port),
        "volumeMounts": mounts,
    }


def replica_deployment(pool: PodPlan, opts: PodOptions) -> Doc:
    """One pool: one pod. A new pod starts and gets ready before the old one stops (maxSurge 1)."""
    volumes, mounts = replica_volumes(pool.config, opts)
    spec: Doc = {
        "enableServiceLinks": False,  # no {SERVICE}_PORT variables in the replica's environment
        "terminationGracePeriodSeconds": replica_grace_s(pool.config),
        "containers": [replica_container(pool, opts, mounts)],
        "volumes": volumes,
    }
    if pool.gpus:
        spec["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(pool.name, "replica", pool),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels("replica", pool)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": labels("replica", pool)}, "spec": spec},
        },
    }


def service(name: str, component: str, port: int, pool: PodPlan | None = None) -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(name, component, pool),
        "spec": {
            "type": "ClusterIP",
            "selector": labels(component, pool),
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def replica_pdb() -> Doc:
    """At most one replica pod down by a voluntary disruption (a node drain) at a time, across pools;
    one that is not ready may always be evicted, so a broken replica never blocks a drain."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(f"{NAME}-replicas", "replica"),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": labels("replica")},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def replica_network_policy() -> Doc:
    """Only the front reaches the replicas' port (as the gateway alone reaches a host's replicas):
    no pod of the cluster can go around Nginx's limits. Kubelet's probes come from the node."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(f"{NAME}-replicas", "replica"),
        "spec": {
            "podSelector": {"matchLabels": labels("replica")},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": {"matchLabels": labels("front")}}],
                    "ports": [{"protocol": "TCP", "port": "http"}],
                }
            ],
        },
    }

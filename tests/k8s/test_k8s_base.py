"""`render k8s` for a GPU and a CPU config, built with kubectl kustomize and validated strictly."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from hunyuan_serve.cli import build_parser
from hunyuan_serve.config import build_config, config_from_args
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.k8s import manifests
from hunyuan_serve.run.health import State
from hunyuan_serve.run.plan import plan_replicas
from tests.support.kube import (
    Doc,
    build,
    configmap_of,
    container,
    mount_of,
    of_kind,
    pod_spec,
    render,
    validate,
)

GPU_FLAGS = (
    "--gpus", "0,1,2,3", "--tensor-parallel-size", "2", "--model", "tencent/Hunyuan-MT-7B",
    "--keys-file", "/etc/hunyuan-serve/keys.txt", "--namespace", "mt", "--image", "registry.example/hs:1",
)  # fmt: skip
CPU_FLAGS = (
    "--replicas", "3", "--model", "/models/HY-MT1.5-1.8B", "--model-pvc", "models", "--allow-open",
    "--pod-cpu", "2", "--pod-memory", "12Gi", "--probe-interval-s", "2", "--startup-timeout-s", "301",
    "--deep-probe-every", "10", "--unhealthy-threshold", "4", "--port", "9000",
)  # fmt: skip


@pytest.fixture(scope="module")
def gpu(tmp_path_factory: pytest.TempPathFactory) -> list[Doc]:
    return build(render(tmp_path_factory.mktemp("gpu") / "base", *GPU_FLAGS))


@pytest.fixture(scope="module")
def cpu(tmp_path_factory: pytest.TempPathFactory) -> list[Doc]:
    return build(render(tmp_path_factory.mktemp("cpu") / "base", *CPU_FLAGS))


def replicas(docs: list[Doc]) -> list[Doc]:
    found = of_kind(docs, "Deployment")
    return [found[name] for name in sorted(found) if name.startswith("hunyuan-serve-replica-")]


def front(docs: list[Doc]) -> Doc:
    return of_kind(docs, "Deployment")["hunyuan-serve-front"]


@pytest.mark.parametrize("which", ["gpu", "cpu"])
def test_every_document_passes_strict_validation(which: str, request: pytest.FixtureRequest) -> None:
    docs: list[Doc] = request.getfixturevalue(which)
    validate(docs)
    pools = 2 if which == "gpu" else 3
    kinds = sorted(d["kind"] for d in docs)
    assert kinds.count("Deployment") == pools + 1 and kinds.count("Service") == pools + 1
    assert kinds.count("ConfigMap") == 3 and kinds.count("PodDisruptionBudget") == 1
    assert kinds.count("NetworkPolicy") == 1


def test_strict_validation_rejects_a_misspelt_field(gpu: list[Doc]) -> None:
    # The check above can fail: a field Kubernetes does not know is an error, not ignored.
    broken = copy.deepcopy(replicas(gpu)[0])
    pod_spec(broken)["containers"][0]["livenesProbe"] = {"httpGet": {"path": "/health", "port": "http"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate([broken])


def test_gpu_pools_request_their_tensor_parallel_gpus(gpu: list[Doc]) -> None:
    pools = replicas(gpu)
    assert [d["metadata"]["name"] for d in pools] == ["hunyuan-serve-replica-0", "hunyuan-serve-replica-1"]
    for deployment in pools:
        box = container(deployment)
        assert box["resources"]["limits"]["nvidia.com/gpu"] == 2
        assert box["resources"]["requests"]["nvidia.com/gpu"] == 2
        env = {e["name"]: e.get("value") for e in box["env"]}
        # up's CUDA environment, but the devices are the device plugin's, not this host's indexes.
        assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
        assert "CUDA_VISIBLE_DEVICES" not in env
        assert box["image"] == "registry.example/hs:1" and deployment["spec"]["replicas"] == 1
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod_spec(
            deployment
        )["tolerations"]
    assert {d["metadata"]["namespace"] for d in gpu} == {"mt"}


def test_cpu_pools_request_cpu_and_memory_and_no_gpu(cpu: list[Doc]) -> None:
    pools = replicas(cpu)
    assert len(pools) == 3
    assert "nvidia.com/gpu" not in yaml.safe_dump_all(cpu)
    for deployment in pools:
        box = container(deployment)
        assert box["resources"] == {"requests": {"cpu": "2", "memory": "12Gi"}, "limits": {"memory": "12Gi"}}
        model = mount_of(deployment, "model")
        assert model["mountPath"] == "/models/HY-MT1.5-1.8B" and model["readOnly"] is True
        (volume,) = [v for v in pod_spec(deployment)["volumes"] if v["name"] == "model"]
        assert volume["persistentVolumeClaim"] == {"claimName": "models", "readOnly": True}
        assert "tolerations" not in pod_spec(deployment)
    assert {d["metadata"]["namespace"] for d in cpu} == {"hunyuan-serve"}


def test_probes_and_grace_follow_the_supervisor_fields(cpu: list[Doc]) -> None:
    box = container(replicas(cpu)[0])
    startup, ready, live = box["startupProbe"], box["readinessProbe"], box["livenessProbe"]
    assert startup["httpGet"] == {"path": "/health", "port": "http"} and startup["periodSeconds"] == 2
    assert startup["failureThreshold"] == math.ceil(301 / 2)  # startup_timeout_s, in probe periods
    assert ready["httpGet"]["path"] == "/health" and ready["failureThreshold"] == 4
    assert ready["periodSeconds"] == 2 and ready["timeoutSeconds"] == 2
    # Liveness is the deep probe, every deep_probe_every-th probe period, waiting out the replica's deadline.
    # From inside the pod: the replica answers the deep probe to loopback callers only, not kubelet's.
    port = container(replicas(cpu)[0])["ports"][0]["containerPort"]
    assert live["exec"]["command"][-1] == f"http://127.0.0.1:{port}/health?deep=1"
    assert live["periodSeconds"] == 2 * 10
    assert live["timeoutSeconds"] == 10 + 2 and live["failureThreshold"] == 4
    assert pod_spec(replicas(cpu)[0])["terminationGracePeriodSeconds"] == 30 + 10
    assert pod_spec(front(cpu))["terminationGracePeriodSeconds"] == 30 + 10


def test_without_deep_probes_liveness_is_the_shallow_health() -> None:
    probes = manifests.replica_probes(build_config({}, {"supervisor.deep_probe_every": 0}))
    assert probes["livenessProbe"]["httpGet"]["path"] == "/health"
    assert probes["startupProbe"]["failureThreshold"] == 900  # 900 s in probes of 1 s (0.5 s rounded up)


@pytest.mark.parametrize("which", ["gpu", "cpu"])
def test_each_service_routes_to_its_own_pool_on_the_containers_port(
    which: str, request: pytest.FixtureRequest
) -> None:
    docs: list[Doc] = request.getfixturevalue(which)
    services = of_kind(docs, "Service")
    deployments = of_kind(docs, "Deployment").values()
    for name, svc in services.items():
        selector = svc["spec"]["selector"]
        chosen = [
            d for d in deployments if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert [d["metadata"]["name"] for d in chosen] == [
            name if name != "hunyuan-serve" else "hunyuan-serve-front"
        ]
        (port,) = svc["spec"]["ports"]
        (cport,) = container(chosen[0])["ports"]
        assert port["targetPort"] == cport["name"] == "http" and port["port"] == cport["containerPort"]


def test_front_nginx_conf_is_ups_template_over_the_pool_services(cpu: list[Doc]) -> None:
    services = of_kind(cpu, "Service")
    pools = [services[n] for n in sorted(services) if n != "hunyuan-serve"]
    addrs = [f"{s['metadata']['name']}:{s['spec']['ports'][0]['port']}" for s in pools]
    nginx = front(cpu)
    conf = configmap_of(cpu, nginx, "nginx-conf")["data"]["nginx.conf"]
    for addr in addrs:
        assert f"        server {addr} max_fails=" in conf
    # Byte for byte what render_nginx makes for those Services, all up, with the replicas' config, at
    # the prefix and web root the Deployment mounts: the same template and code path as `up`'s.
    argv = container(nginx)["command"]
    prefix, conf_path = argv[argv.index("-p") + 1], argv[argv.index("-c") + 1]
    assert conf_path == mount_of(nginx, "nginx-conf")["mountPath"] + "/nginx.conf"
    assert [mount_of(nginx, v)["mountPath"] for v in ("nginx-run", "nginx-logs", "nginx-temp")] == [
        prefix, f"{prefix}/logs", f"{prefix}/temp"
    ]  # fmt: skip
    replica_cfg = yaml.safe_load(configmap_of(cpu, replicas(cpu)[0], "config")["data"]["replica-0.yaml"])
    cfg = build_config(replica_cfg, {"nginx.listen": "0.0.0.0"})
    routing = routing_from_states([(a, State.READY) for a in addrs])
    web = Path(mount_of(nginx, "web")["mountPath"])
    assert conf == render_nginx(cfg, routing, prefix=Path(prefix), web_root=web, worker_user=None)
    assert "listen 0.0.0.0:9000;" in conf and services["hunyuan-serve"]["spec"]["ports"][0]["port"] == 9000
    assert '"model":"HY-MT1.5-1.8B"' in conf  # the served name: the checkpoint's directory
    assert set(configmap_of(cpu, nginx, "web")["data"]) == {
        "index.html",
        "app.js",
        "documents.js",
        "style.css",
    }


def test_replica_command_is_ups_replica_argv_and_reads_its_config(gpu: list[Doc], tmp_path: Path) -> None:
    user = build_config({}, {"gpus": "0,1,2,3", "engine.tensor_parallel_size": 2})
    for deployment in replicas(gpu):
        box = container(deployment)
        config_dir = mount_of(deployment, "config")["mountPath"]
        plans = plan_replicas(user, visible_gpus=[], cores=[0], run_dir=Path(config_dir), python="python")
        index = int(deployment["metadata"]["name"].rsplit("-", 1)[1])
        assert box["command"] == list(plans[index].argv)
        # The argv as the replica's own parser reads it, with the ConfigMap's file for --config.
        key = Path(box["command"][box["command"].index("--config") + 1]).name
        local = tmp_path / key
        local.write_text(configmap_of(gpu, deployment, "config")["data"][key])
        argv = [local.as_posix() if a.endswith(key) else a for a in box["command"][3:]]
        cfg = config_from_args(build_parser().parse_args(argv))
        assert cfg.replica.port == box["ports"][0]["containerPort"] and cfg.replica.host == "0.0.0.0"
        assert yaml.safe_load(local.read_text())["replica"]["port"] == cfg.replica.port  # as `up` writes it
        assert cfg.engine.device == "cuda" and cfg.engine.model == "tencent/Hunyuan-MT-7B"
        assert cfg.engine.tensor_parallel_size == 2
        keys = mount_of(deployment, "keys")
        assert cfg.auth.keys_file == keys["mountPath"] and keys["subPath"] == manifests.KEYS_SECRET_KEY
        secret: dict[str, Any] = next(v for v in pod_spec(deployment)["volumes"] if v["name"] == "keys")
        assert secret["secret"]["secretName"] == manifests.KEYS_SECRET


def test_pdb_allows_one_replica_down_and_spares_the_front(gpu: list[Doc]) -> None:
    (pdb,) = of_kind(gpu, "PodDisruptionBudget").values()
    assert pdb["spec"]["maxUnavailable"] == 1 and pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    wanted = pdb["spec"]["selector"]["matchLabels"].items()
    assert all(wanted <= d["spec"]["template"]["metadata"]["labels"].items() for d in replicas(gpu))
    assert not wanted <= front(gpu)["spec"]["template"]["metadata"]["labels"].items()


def test_only_the_front_reaches_the_replicas_port(gpu: list[Doc]) -> None:
    (policy,) = of_kind(gpu, "NetworkPolicy").values()
    chosen = policy["spec"]["podSelector"]["matchLabels"].items()
    assert all(chosen <= d["spec"]["template"]["metadata"]["labels"].items() for d in replicas(gpu))
    assert not chosen <= front(gpu)["spec"]["template"]["metadata"]["labels"].items()
    (rule,) = policy["spec"]["ingress"]
    (source,) = rule["from"]
    assert (
        source["podSelector"]["matchLabels"].items()
        <= front(gpu)["spec"]["template"]["metadata"]["labels"].items()
    )
    assert rule["ports"] == [{"protocol": "TCP", "port": "http"}] and policy["spec"]["policyTypes"] == [
        "Ingress"
    ]


@pytest.mark.parametrize("which", ["gpu", "cpu"])
def test_every_object_carries_the_one_label_set(which: str, request: pytest.FixtureRequest) -> None:
    docs: list[Doc] = request.getfixturevalue(which)
    for doc in docs:
        found = doc["metadata"]["labels"]
        assert found["app.kubernetes.io/name"] == "hunyuan-serve", doc["metadata"]["name"]
        assert found["app.kubernetes.io/component"] in ("replica", "front", "config"), doc["metadata"]["name"]

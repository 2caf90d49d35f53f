"""The rendered Kubernetes base run by `podman kube play` with the images `make image` builds: the replica
pod and the front come up, their probes pass, a translation goes through the front's port.

kube play runs Deployments, their pods and ConfigMaps, not Service, NetworkPolicy or
PodDisruptionBudget. They are covered here by what they would do: each Service's name resolves, in
the front's pod, to the one replica pod its selector picks (hostAliases, so nginx.conf's upstream names
work unchanged); the NetworkPolicy's and the PDB's selectors pick exactly the replica pods and the
policy admits exactly the front's; kubelet's probes are sent by the test, as kubelet would send them,
to each pod's address (kube play leaves readiness to no one, and its healthchecks need systemd)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from hunyuan_serve.cli import main
from tests.support import podman
from tests.support.kube import build, of_kind

# The first test of a cold cache waits for the image build (about 4 min here) in its setup.
pytestmark = [pytest.mark.container, pytest.mark.timeout(1800)]

Doc = dict[str, Any]
NETWORK, SUBNET = "hs-kube-test", "10.89.77"
PLAYED = {"ConfigMap", "Deployment"}
READY_S = 300


def labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def pod_labels(deployment: Doc) -> dict[str, str]:
    found: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return found


def check_unplayed_kinds(docs: list[Doc]) -> None:
    """What Service, NetworkPolicy and PDB would do, checked on the documents kube play cannot run."""
    deployments = of_kind(docs, "Deployment")
    replicas = {
        n: d for n, d in deployments.items() if pod_labels(d)["app.kubernetes.io/component"] == "replica"
    }
    front = deployments["hunyuan-serve-front"]
    for name, svc in of_kind(docs, "Service").items():
        picked = [n for n, d in deployments.items() if labels_match(svc["spec"]["selector"], pod_labels(d))]
        assert len(picked) == 1, (name, picked)  # one Service per replica pod, one for the front
    (policy,) = of_kind(docs, "NetworkPolicy").values()
    (budget,) = of_kind(docs, "PodDisruptionBudget").values()
    for selector in (policy["spec"]["podSelector"]["matchLabels"], budget["spec"]["selector"]["matchLabels"]):
        assert {n for n, d in deployments.items() if labels_match(selector, pod_labels(d))} == set(replicas)
    (rule,) = policy["spec"]["ingress"]
    (source,) = rule["from"]
    assert labels_match(source["podSelector"]["matchLabels"], pod_labels(front))
    assert not any(
        labels_match(source["podSelector"]["matchLabels"], pod_labels(d)) for d in replicas.values()
    )


def played(docs: list[Doc], component: str) -> list[Doc]:
    """The ConfigMaps and the Deployments of one component, the documents kube play runs. Its pods run
    as root here: kube play 4.3 makes an emptyDir root-owned 0755 where Kubernetes makes it writable by
    the pod, so the images' own users could not write /dev/shm (vLLM's locks) or Nginx's pid and logs."""
    chosen = [
        d for d in docs
        if d["kind"] == "ConfigMap"
        or (d["kind"] == "Deployment" and pod_labels(d)["app.kubernetes.io/component"] == component)
    ]  # fmt: skip
    for d in chosen:
        if d["kind"] == "Deployment":
            d["spec"]["template"]["spec"]["securityContext"] = {"runAsUser": 0}
    return chosen


def probe(url: str, deadline_s: float = READY_S) -> None:
    """A probe as kubelet sends it: GET, 2xx-3xx passes; retried until the startup deadline."""
    start = time.monotonic()
    while time.monotonic() - start < deadline_s:
        try:
            if 200 <= httpx.get(url, timeout=2, trust_env=False).status_code < 400:
                return
        except httpx.TransportError:
            pass
        time.sleep(1)
    raise AssertionError(f"probe {url} did not pass in {deadline_s} s")


def http_probes(deployment: Doc) -> list[str]:
    (box,) = deployment["spec"]["template"]["spec"]["containers"]
    return [
        box[p]["httpGet"]["path"]
        for p in ("startupProbe", "readinessProbe", "livenessProbe")
        if "httpGet" in box.get(p, {})  # the deep liveness probe is an exec, from inside the pod
    ]


def kube_play(path: Path, conf: Path, *flags: str) -> None:
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    done = subprocess.run(
        [podman.podman(), "kube", "play", "--network", NETWORK, *flags, str(path)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def render(tmp: Path, checkpoint: Path) -> list[Doc]:
    # --allow-open, not --keys-file: kube play 4.3 mounts a Secret's subPath as a directory (the keys
    # file as a secret is run by test_image and test_compose).
    flags = ["--replicas", "1", "--model", str(checkpoint), "--allow-open",
             "--pod-cpu", "1", "--pod-memory", "6Gi", "--dtype", "float32",
             "--kv-cache-memory-bytes", str(128 << 20)]  # fmt: skip
    assert main(["render", "k8s", *flags, "--out", str(tmp / "base")]) == 0
    return build(tmp / "base")


def test_the_rendered_base_runs_under_kube_play(image: str, checkpoint: Path, tmp_path: Path) -> None:
    docs = render(tmp_path, checkpoint)
    for d in of_kind(docs, "Deployment").values():
        (box,) = d["spec"]["template"]["spec"]["containers"]
        assert box["image"] in (podman.CPU_IMAGE, podman.FRONT_IMAGE)  # this version's, by default
    check_unplayed_kinds(docs)
    conf = podman.containers_conf(tmp_path)
    podman.run(["network", "rm", "-f", NETWORK], check=False)
    podman.run(["network", "create", "--subnet", f"{SUBNET}.0/24", NETWORK])
    files = {c: tmp_path / f"{c}.yaml" for c in ("replica", "front")}
    try:
        replica = played(docs, "replica")
        files["replica"].write_text(yaml.safe_dump_all(replica))
        kube_play(files["replica"], conf, "--ip", f"{SUBNET}.10")
        (deployment,) = [d for d in replica if d["kind"] == "Deployment"]
        port = deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
        for path in http_probes(deployment):  # startup, readiness, liveness (deep)
            probe(f"http://{SUBNET}.10:{port}{path}")
        front = played(docs, "front")
        host_port = podman.free_port()
        for d in front:
            if d["kind"] == "Deployment":
                spec = d["spec"]["template"]["spec"]
                # The Service names nginx.conf's upstream lists, resolved as cluster DNS would.
                services = [n for n in of_kind(docs, "Service") if n != "hunyuan-serve"]
                spec["hostAliases"] = [{"ip": f"{SUBNET}.10", "hostnames": services}]
                spec["containers"][0]["ports"][0]["hostPort"] = host_port
        files["front"].write_text(yaml.safe_dump_all(front))
        kube_play(files["front"], conf)
        probe(f"http://127.0.0.1:{host_port}/health")
        answer = httpx.post(
            f"http://127.0.0.1:{host_port}/translate",
            json={"text": "Hello", "source_lang": "en", "target_lang": "zh"}, timeout=60, trust_env=False,
        )  # fmt: skip
        assert answer.status_code == 200 and answer.json()["model"] == "hunyuan-mt-tiny", answer.text
    finally:
        for path in files.values():
            if path.exists():
                podman.run(["kube", "down", str(path)], check=False, timeout=180)
        podman.run(["network", "rm", "-f", NETWORK], check=False)
        # kube play keeps each ConfigMap as a volume of its name; kube down leaves them.
        podman.remove_volumes(*of_kind(docs, "ConfigMap"))

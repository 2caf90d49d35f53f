"""A replica pod keeps vLLM's, Inductor's and Triton's compile caches on an emptyDir, which outlives a
container restart in the pod: a replica restarted by its liveness probe does not compile again."""

from __future__ import annotations

from pathlib import Path

from hunyuan_serve.k8s.manifests import COMPILE_CACHE
from tests.support.kube import build, container, mount_of, of_kind, pod_spec, render, validate


def test_the_compile_caches_live_on_the_pods_empty_dir(tmp_path: Path) -> None:
    docs = build(render(tmp_path / "base", "--device", "cuda", "--replicas", "1", "--model", "org/Model",
                        "--allow-open"))  # fmt: skip
    validate(docs)
    (replica,) = [d for n, d in of_kind(docs, "Deployment").items() if n != "hunyuan-serve-front"]
    assert mount_of(replica, "compile-cache")["mountPath"] == COMPILE_CACHE
    (volume,) = [v for v in pod_spec(replica)["volumes"] if v["name"] == "compile-cache"]
    assert volume == {"name": "compile-cache", "emptyDir": {}}
    env = {e["name"]: e.get("value", "") for e in container(replica)["env"]}
    for name in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        assert env[name].startswith(COMPILE_CACHE + "/"), name

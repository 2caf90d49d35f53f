"""The front's nginx.conf, exactly as its ConfigMap holds it, passes `nginx -t` where its names resolve."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.kube import build, configmap_of, container, of_kind, render

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
UNSHARE = shutil.which("unshare")

# In a private user and mount namespace (nothing outside changes): a tmpfs over /run for the prefix the
# Deployment mounts, and test-only /etc/hosts (the pool Services' names, as cluster DNS would answer) and
# passwd/group (Nginx as root chowns its temp dirs to its worker user, which must be mapped there).
SCRIPT = """set -e
mount -t tmpfs tmpfs /run
mkdir -p "$PREFIX/logs" "$PREFIX/temp"
mount --bind "$WORK/hosts" /etc/hosts
mount --bind "$WORK/passwd" /etc/passwd
mount --bind "$WORK/group" /etc/group
exec "$NGINX" -t -p "$PREFIX" -c "$WORK/nginx.conf" -e stderr
"""


def _namespaces_work() -> bool:
    if UNSHARE is None:
        return False
    done = subprocess.run([UNSHARE, "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    return done.returncode == 0


def _nginx_t(work: Path, prefix: str, names: list[str]) -> subprocess.CompletedProcess[str]:
    (work / "hosts").write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.1 {n}\n" for n in names))
    (work / "passwd").write_text("root:x:0:0::/root:/bin/sh\nnobody:x:0:0::/:/bin/false\n")
    (work / "group").write_text("root:x:0:\nnobody:x:0:\nnogroup:x:0:\n")
    env = {"PREFIX": prefix, "WORK": str(work), "NGINX": str(NGINX), "PATH": "/usr/sbin:/usr/bin:/bin"}
    argv = [str(UNSHARE), "--user", "--map-root-user", "--mount", "sh", "-c", SCRIPT]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.nginx
@pytest.mark.skipif(NGINX is None, reason="nginx is not installed")
@pytest.mark.skipif(not _namespaces_work(), reason="cannot create a user and mount namespace (unshare -rm)")
@pytest.mark.parametrize(
    "flags",
    [
        ("--gpus", "0,1,2,3", "--tensor-parallel-size", "2", "--allow-open"),
        (
            "--replicas",
            "2",
            "--model",
            "/m",
            "--keys-file",
            "/k",
            "--key-rate-limit-rps",
            "5",
            "--cors-origins",
            "*",
        ),
    ],
)
def test_front_config_passes_nginx_t_with_the_service_names_resolvable(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    docs = build(render(tmp_path / "base", *flags))
    deployment = of_kind(docs, "Deployment")["hunyuan-serve-front"]
    (tmp_path / "nginx.conf").write_text(configmap_of(docs, deployment, "nginx-conf")["data"]["nginx.conf"])
    argv = container(deployment)["command"]
    prefix = argv[argv.index("-p") + 1]
    names = [n for n in of_kind(docs, "Service") if n != "hunyuan-serve"]
    done = _nginx_t(tmp_path, prefix, names)
    assert done.returncode == 0, done.stderr
    assert "test is successful" in done.stderr
    # And it is the names that make it pass: without them Nginx cannot resolve the upstream servers.
    missing = _nginx_t(tmp_path, prefix, [])
    assert missing.returncode != 0 and "host not found in upstream" in missing.stderr

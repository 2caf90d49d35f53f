"""`render k8s --tls-secret`: the front serves the Secret's pair over HTTPS; built with kubectl kustomize,
validated strictly, and its nginx.conf passes `nginx -t` with a real pair where the Secret is mounted."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from hunyuan_serve.cli import main
from hunyuan_serve.k8s.front import FRONT_GID, TLS_MODE
from hunyuan_serve.k8s.manifests import TLS_DIR
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
from tests.support.tls_certs import make_ca

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
FLAGS = ("--replicas", "2", "--model", "/m", "--allow-open", "--tls-secret", "edge-tls")


def _config(directory: Path, **nginx: object) -> str:
    """The nginx section as a file (a flag's name may take its section's prefix as fields are added)."""
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump({"nginx": nginx}))
    return str(path)


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> list[Doc]:
    work = tmp_path_factory.mktemp("tls")
    return build(render(work / "base", *FLAGS, "--config", _config(work, tls_port=9443, hsts_max_age_s=3600)))


def _front(docs: list[Doc]) -> Doc:
    return of_kind(docs, "Deployment")["hunyuan-serve-front"]


def test_the_front_mounts_the_secret_and_serves_https(docs: list[Doc]) -> None:
    validate(docs)
    front = _front(docs)
    (volume,) = [v for v in pod_spec(front)["volumes"] if v["name"] == "tls"]
    assert volume["secret"] == {"secretName": "edge-tls", "defaultMode": TLS_MODE}
    assert mount_of(front, "tls") == {"name": "tls", "mountPath": TLS_DIR, "readOnly": True}
    assert pod_spec(front)["securityContext"] == {"fsGroup": FRONT_GID}
    nginx = container(front)
    assert [(p["name"], p["containerPort"]) for p in nginx["ports"]] == [("http", 8080), ("https", 9443)]
    assert nginx["readinessProbe"]["httpGet"] == {"path": "/health", "port": "https", "scheme": "HTTPS"}
    assert nginx["livenessProbe"]["tcpSocket"] == {"port": "https"}
    service = of_kind(docs, "Service")["hunyuan-serve"]
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [
        ("http", 8080, "http"),
        ("https", 9443, "https"),
    ]
    conf = configmap_of(docs, front, "nginx-conf")["data"]["nginx.conf"]
    assert "listen 0.0.0.0:9443 ssl http2;" in conf and f'ssl_certificate "{TLS_DIR}/tls.crt";' in conf
    assert f'ssl_certificate_key "{TLS_DIR}/tls.key";' in conf and 'https "max-age=3600";' in conf
    assert not [d for d in docs if d["kind"] == "Secret"]  # the pair is the user's, never rendered


def test_plain_http_off_leaves_only_https_in_the_service(tmp_path: Path) -> None:
    docs = build(render(tmp_path / "base", *FLAGS, "--config", _config(tmp_path, plain_http="off")))
    validate(docs)
    service = of_kind(docs, "Service")["hunyuan-serve"]
    assert [p["name"] for p in service["spec"]["ports"]] == ["https"]
    assert [p["name"] for p in container(_front(docs))["ports"]] == ["https"]


def test_a_host_path_pair_is_refused_naming_the_secret_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, tls_cert="/etc/ssl/a.crt", tls_key="/etc/ssl/a.key")
    code = main(
        [
            "render",
            "k8s",
            "--replicas",
            "1",
            "--allow-open",
            "--config",
            config,
            "--out",
            str(tmp_path / "base"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "nginx.tls_cert /etc/ssl/a.crt is a file on this host" in err
    assert "pass --tls-secret NAME" in err and not (tmp_path / "base").exists()


@pytest.mark.nginx
@pytest.mark.skipif(NGINX is None, reason="nginx is not installed")
def test_the_front_config_passes_nginx_t_with_a_real_pair(docs: list[Doc], tmp_path: Path) -> None:
    pair = make_ca(tmp_path / "ca").issue(tmp_path / "tls", "tls")
    conf = configmap_of(docs, _front(docs), "nginx-conf")["data"]["nginx.conf"]
    prefix = tmp_path / "prefix"
    for sub in ("logs", "temp"):
        (prefix / sub).mkdir(parents=True)
    # The Secret's mount and the prefix as this test has them; the Services' names resolve to nothing
    # here, so the upstreams point at loopback (the k8s nginx test checks the names themselves).
    text = conf.replace(f"{TLS_DIR}/tls.crt", str(pair.cert)).replace(f"{TLS_DIR}/tls.key", str(pair.key))
    text = text.replace("/run/hunyuan-serve/nginx", str(prefix))
    for name in [n for n in of_kind(docs, "Service") if n != "hunyuan-serve"]:
        text = text.replace(f"server {name}:", "server 127.0.0.1:")
    (tmp_path / "nginx.conf").write_text(text)
    argv = [str(NGINX), "-t", "-p", str(prefix), "-c", str(tmp_path / "nginx.conf"), "-e", "stderr"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr

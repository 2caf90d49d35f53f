"""deploy/compose/ read by podman-compose (PyPI), a real Compose implementation, as written; then run once
here with the CPU image and the tiny checkpoint (an override resets the GPU reservation)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support import podman
from tests.support.podman import KEY

# The first test of a cold cache waits for the image build (about 4 min here) in its setup.
pytestmark = [pytest.mark.container, pytest.mark.timeout(1800)]

COMPOSE = podman.ROOT / "deploy" / "compose"
PROJECT = "hs-compose-test"


def compose(files: list[Path], *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    binary = Path(sys.executable).parent / "podman-compose"
    flags = [f"--file={f}" for f in files]
    done = subprocess.run(
        [str(binary), f"--project-name={PROJECT}", *flags, *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def service(files: list[Path]) -> dict[str, Any]:
    config = yaml.safe_load(compose(files, "config"))
    return dict(config["services"]["hunyuan-serve"]) | {"_all": config}


def test_the_one_host_stack_reads_as_written() -> None:
    svc = service([COMPOSE / "compose.yaml"])
    (gpu,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert gpu == {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}
    assert (
        svc["secrets"] == ["hunyuan-serve-keys"]
        and "--keys-file=/run/secrets/hunyuan-serve-keys" in svc["command"]
    )
    assert svc["healthcheck"]["test"][-1] == "http://127.0.0.1:8080/health"
    assert svc["restart"] == "unless-stopped" and svc["read_only"] is True and svc["tmpfs"] == ["/tmp"]
    assert sorted(svc["volumes"]) == ["cache:/var/cache/hunyuan-serve", "run:/var/lib/hunyuan-serve"]
    assert svc["image"].endswith(":0.1.0-gpu") and svc["ports"] == ["8080:8080"]
    with_redis = service([COMPOSE / "compose.yaml", COMPOSE / "redis.yaml"])
    assert "--cache-redis-url=redis://redis:6379/0" in with_redis["command"]
    assert with_redis["_all"]["services"]["redis"]["volumes"] == ["redis:/data"]


def override(tmp: Path, checkpoint: Path, keys: Path) -> Path:
    path = tmp / "cpu.yaml"
    path.write_text(
        f"""\
services:
  hunyuan-serve:
    image: {podman.CPU_IMAGE}
    deploy: !reset {{}}
    shm_size: 1gb
    command: [up, --nginx-listen=0.0.0.0, --model=/models/hunyuan-mt-tiny,
              --keys-file=/run/secrets/hunyuan-serve-keys, --dtype=float32, --kv-cache-memory-bytes=134217728]
    volumes:
      - {checkpoint}:/models/hunyuan-mt-tiny:ro
secrets:
  hunyuan-serve-keys:
    file: {keys}
"""
    )
    return path


def test_the_stack_runs_once_under_compose(image: str, checkpoint: Path, keys: Path, tmp_path: Path) -> None:
    files = [COMPOSE / "compose.yaml", override(tmp_path, checkpoint, keys)]
    port = podman.free_port()
    # The machine's runtime and rlimits (tests/container/podman.py), never the compose file's.
    env = {"HUNYUAN_SERVE_PORT": str(port), "CONTAINERS_CONF": str(podman.containers_conf(tmp_path))}
    compose(files, "down", "--volumes", env=env)
    try:
        compose(files, "up", "--detach", env=env)
        deadline = time.monotonic() + 600
        url = f"http://127.0.0.1:{port}"
        while True:
            try:
                if httpx.get(url + "/health", timeout=5, trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, compose(files, "logs", env=env)[-3000:]
            time.sleep(1)
        answer = httpx.post(
            url + "/translate", json={"text": "Hello", "source_lang": "en", "target_lang": "zh"},
            headers={"Authorization": f"Bearer {KEY}"}, timeout=60, trust_env=False,
        )  # fmt: skip
        assert answer.status_code == 200 and answer.json()["model"] == "hunyuan-mt-tiny", answer.text
    finally:
        compose(files, "down", "--volumes", env=env)

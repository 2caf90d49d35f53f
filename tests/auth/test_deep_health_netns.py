"""The deep health from a genuinely other address: a replica (the engine stand-in) on a bridge, asked
from a network namespace, refuses the deep probe without a key and answers it with one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from bench import netns
from tests.support.stacks import cli, free_port, http_ok, started

KEY = "sk-deep-health-0123456789"
UNAVAILABLE = netns.unavailable()


def _curl(lab: netns.Lab, url: str, *headers: str) -> tuple[int, str]:
    """GET url from inside host a: its status and body."""
    argv = ["curl", "-s", "--max-time", "20", "-w", "\n%{http_code}", url]
    for header in headers:
        argv += ["-H", header]
    done = subprocess.run(lab.host("a").argv(argv), capture_output=True, text=True, timeout=30, check=False)
    body, _, status = done.stdout.rpartition("\n")
    return int(status or 0), body


@pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))
def test_a_caller_off_this_host_needs_a_key_for_the_deep_health(tiny_model_dir: Path, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    with netns.hosts(["a"]) as lab:
        port, bridge = free_port(), lab.net.addr  # the root namespace's address on the bridge
        argv = cli("replica", "--model", str(tiny_model_dir), "--stand-in", "true", "--max-model-len", "512")
        argv += ["--host", bridge, "--port", str(port), "--keys-file", str(keys)]
        url = f"http://{bridge}:{port}"
        with started(argv, log=tmp_path / "replica.log", ready=http_ok(url + "/health"), timeout_s=120):
            status, body = _curl(lab, url + "/health?deep=1")
            assert status == 403 and "deep_health_refused" in body and "an API key" in body, body
            assert _curl(lab, url + "/health")[0] == 200  # the shallow one stays open
            status, body = _curl(lab, url + "/health?deep=1", f"Authorization: Bearer {KEY}")
            assert status == 200 and '"deep":true' in body.replace(" ", ""), body
            # This host calling the address the replica binds: the supervisor's own probe.
            own = httpx.get(url + "/health", params={"deep": "1"}, trust_env=False, timeout=30)
            assert own.status_code == 200 and own.json()["deep"] is True

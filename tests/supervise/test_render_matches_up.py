"""`render nginx --starting` holds, byte for byte, the nginx.conf a real `up` wrote in its run dir with the
same flags: on this CPU machine, and with a stand-in nvidia-smi listing GPUs (one with MIG on).

`up` runs for real (its preflight, model placement, supervisor and Nginx); its replicas get the stand-in
torch and vLLM of tests/gpu/test_cuda_untouched.py, whose import ends them at once, so no replica ever
becomes ready and the config `up` started Nginx with is the one left in the run dir.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hunyuan_serve.run.events import read_events
from tests.gpu.test_cuda_untouched import _model, _stubs
from tests.gpu.test_gpu_facts import LISTING, QUERY
from tests.support.stacks import cli, free_ports, started, wait_event
from tests.support.tls_certs import make_ca

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.nginx,
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed"),
]

STARTED_TIMEOUT_S = 120.0
# What doctor reads of torch without importing it (its version.py), for a CUDA build the driver serves.
TORCH_VERSION = "__version__ = '2.14.0+cu130'\ncuda = '13.0'\n"
# The first two GPUs of the parsing tests' stand-in answers: an H100, and an A100 with two MIG instances.
GPU_LINES = 2


def _nvidia_smi(bin_dir: Path) -> None:
    """A stand-in nvidia-smi on PATH, answering the two queries gpu.query_gpus makes."""
    query = "".join(QUERY.splitlines(keepends=True)[:GPU_LINES])
    listing = "".join(line for line in LISTING.splitlines(keepends=True) if "Tesla" not in line)
    script = (
        f"#!{sys.executable}\nimport sys\n"
        f"sys.stdout.write({listing!r} if sys.argv[1:] == ['-L'] else {query!r})\n"
    )
    bin_dir.mkdir(parents=True)
    (bin_dir / "nvidia-smi").write_text(script, encoding="utf-8")
    (bin_dir / "nvidia-smi").chmod(0o755)


def _environment(root: Path, gpus: bool) -> dict[str, str]:
    """up's environment: the stand-in torch and vLLM (vLLM's import exits), and with gpus the stand-in
    nvidia-smi, a CUDA torch's version file and an installed `vllm` distribution for doctor."""
    stubs = _stubs(root / "stubs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_") and k != "CUDA_VISIBLE_DEVICES"}
    env.update(PYTHONPATH=str(stubs), STUB_LOG=str(root / "stub.log"), STUB_VLLM_EXIT="1")
    if gpus:
        (stubs / "torch" / "version.py").write_text(TORCH_VERSION, encoding="utf-8")
        dist = stubs / "vllm-0.33.0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n", encoding="utf-8"
        )
        _nvidia_smi(root / "bin")
        env["PATH"] = f"{root / 'bin'}{os.pathsep}{env['PATH']}"
    else:
        env["PATH"] = os.pathsep.join(
            p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "nvidia-smi").exists()
        )
    return env


def _written_by_up(flags: list[str], run_dir: Path, env: dict[str, str], log: Path) -> tuple[str, dict]:
    """The nginx.conf `up` started Nginx with, and its first event (what it planned)."""
    events = run_dir / "events.jsonl"
    with started(cli("up", *flags), log=log, env=env) as proc:
        found = wait_event(
            proc, log, lambda: read_events(events), lambda e: e["event"] == "nginx_started", STARTED_TIMEOUT_S
        )
        assert found["config"] == 1 and found["ready"] == 0, found
        text = (run_dir / "nginx" / "nginx.conf").read_text(encoding="utf-8")
        first = read_events(events)[0]
    return text, first


def _tls_flags(directory: Path) -> list[str]:
    """The front on TLS too: a pair from a CA made here, and a TLS port."""
    pair = make_ca(directory).issue(directory, "front")
    (tls_port,) = free_ports(1)
    return [
        "--nginx-tls-cert",
        str(pair.cert),
        "--nginx-tls-key",
        str(pair.key),
        "--tls-port",
        str(tls_port),
    ]


@pytest.mark.parametrize(
    ("gpus", "tls"), [(False, False), (True, False), (False, True)], ids=["cpu", "stand-in-gpus", "cpu-tls"]
)
def test_render_nginx_starting_is_the_config_up_wrote(tmp_path: Path, gpus: bool, tls: bool) -> None:
    port, base = free_ports(2)
    run_dir = tmp_path / "run"
    model = _model(tmp_path)  # a Hunyuan-MT-7B config.json: the family comes from the checkpoint
    flags = ["--model", str(model), "--run-dir", str(run_dir), "--port", str(port), "--base-port", str(base)]
    flags += ["--worker-processes", "1"] + ([] if gpus else ["--replicas", "2"])
    # With TLS, up's Nginx reads its run dir's copies of the pair (edge/kept_tls.py): so must render's.
    flags += _tls_flags(tmp_path / "tls") if tls else []
    env = _environment(tmp_path, gpus)
    written, planned = _written_by_up(flags, run_dir, env, tmp_path / "up.log")
    rendered = subprocess.run(
        cli("render", "nginx", "--starting", *flags), env=env, capture_output=True, text=True, timeout=120
    )
    assert rendered.returncode == 0, rendered.stderr
    assert rendered.stdout == written
    # What the two agree on is this machine's: its devices, the checkpoint's name and family, and the
    # cap per replica (what it runs and lets wait: max_in_flight 256 + max_queued 2048).
    devices = planned["devices"]
    if gpus:
        assert devices == ["cuda:0", "cuda:MIG-dddd-4444", "cuda:MIG-eeee-5555"]
    else:
        assert len(devices) == 2 and all(d.startswith("cpu:") for d in devices), devices
    # The served name is the checkpoint's (its path, or its directory's name), never "".
    health = r'"status":"unavailable","model":"[^"]*Hunyuan-MT-7B","family":"hunyuan-mt","ready":0'
    assert re.search(health, written)
    assert written.count("max_conns=2304 down;") == len(devices)

"""The setups `make bench` compares, each started on the same model and stopped after its runs."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from bench.procs import REPO, Server, free_port, http_json, server_env

HUNYUAN = [sys.executable, "-m", "hunyuan_serve"]

MAX_MODEL_LEN = 1024  # every setup's, so that only the serving around the engine differs


@functools.cache
def on_gpu() -> bool:
    from hunyuan_serve.supervise.command import visible_gpus

    return bool(visible_gpus())


def vllm_engine_flags(gpu: bool) -> list[str]:
    """vLLM's own flags for what the replicas choose by themselves on each device (EngineConfig)."""
    flags = ["--max-model-len", str(MAX_MODEL_LEN)]
    # On CPU the replicas run float32 (bfloat16 is slow without AVX512) and eager; on GPU, vLLM's defaults.
    return flags if gpu else [*flags, "--dtype", "float32", "--enforce-eager"]


def start_stack(
    model: Path,
    run_dir: Path,
    *,
    replicas: int,
    base_port: int,
    balance: str = "least_conn",
) -> tuple[Server, str]:
    """`hunyuan-serve up` with its own run dir and ports; returns the server and its public URL."""
    port = free_port()
    argv = [
        *HUNYUAN,
        "up",
        "--model",
        str(model),
        "--replicas",
        str(replicas),
        "--run-dir",
        str(run_dir),
        "--nginx-port",
        str(port),
        "--base-port",
        str(base_port),
        "--balance",
        balance,
        # One SQLite cache shared by the replicas: a repeat hits it whichever replica Nginx picks.
        "--cache-path",
        str(run_dir / "cache.sqlite"),
        "--max-model-len",
        str(MAX_MODEL_LEN),
    ]
    name = f"{run_dir.name}-{balance}"
    server = Server(name, argv, run_dir.parent / f"up-{name}.log", server_env(on_gpu()))
    return server, f"http://127.0.0.1:{port}"


def start_round_robin_nginx(replicas: int, base_port: int, run_dir: Path) -> tuple[Server, str]:
    """A second Nginx, rendered by `hunyuan-serve render nginx --balance round_robin`, in front of the
    same replicas as the stack's: the two balancers are compared on the very same processes."""
    import subprocess

    port = free_port()
    argv = [*HUNYUAN, "render", "nginx", "--balance", "round_robin", "--run-dir", str(run_dir)]
    argv += ["--replicas", str(replicas), "--base-port", str(base_port), "--nginx-port", str(port)]
    text = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=str(REPO), timeout=60).stdout
    prefix = run_dir / "nginx"
    for sub in ("logs", "temp"):
        (prefix / sub).mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(text, encoding="utf-8")
    nginx = ["nginx", "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "logs" / "error.log")]
    subprocess.run([*nginx, "-t", "-q"], check=True, timeout=30)
    return Server(
        "nginx-round-robin", nginx, run_dir / "nginx.log", server_env(on_gpu())
    ), f"http://127.0.0.1:{port}"


def stack_status(run_dir: Path) -> dict[str, Any]:
    """What `hunyuan-serve status --json` prints for the stack in run_dir ({} before its first state).

    Read in this process: a `status` subprocess a second cost a Python start-up each time, taken
    from the engines that were starting on the same two cores.
    """
    from hunyuan_serve.supervise.status import collect_status

    return collect_status(run_dir) or {}


def ready_replicas(run_dir: Path) -> int:
    """How many replicas the stack runs once every one of them is ready; 0 until then.

    The count comes from the stack itself: on a GPU machine `up` runs one replica per device,
    whatever the bench asked for.
    """
    states = [r.get("state") for r in stack_status(run_dir).get("replicas", [])]
    return len(states) if states and all(s == "ready" for s in states) else 0


def start_serial(model: Path, log_dir: Path) -> tuple[Server, str]:
    """The one-at-a-time baseline: one engine, no Nginx, a lock around every request."""
    port = free_port()
    argv = [sys.executable, "-m", "bench.baselines.serial", "--model", str(model), "--port", str(port)]
    # One process, as a Flask or Gradio app holds its model: vLLM runs its engine in-process (no
    # engine-core and worker processes to start, no IPC per step).
    env = server_env(on_gpu(), {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"})
    server = Server("serial", argv, log_dir / "serial.log", env)
    return server, f"http://127.0.0.1:{port}"


def start_vllm(model: Path, log_dir: Path, served_name: str = "model") -> tuple[Server, str]:
    """vLLM's own OpenAI-compatible server, one instance, the engine settings of the stack."""
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--disable-uvicorn-access-log",
        *vllm_engine_flags(on_gpu()),
    ]
    server = Server("vllm-openai", argv, log_dir / "vllm-openai.log", server_env(on_gpu()))
    return server, f"http://127.0.0.1:{port}"


def vllm_ready(url: str) -> bool:
    status, _ = http_json(f"{url}/v1/models", timeout=5)
    return status == 200

"""The setups `make bench` compares, each started on the same model and stopped after its runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.procs import REPO, Server, cpu_env, free_port, http_json

HUNYUAN = [sys.executable, "-m", "hunyuan_serve"]

# Engine settings shared by every setup, so that only the serving around the engine differs.
ENGINE_FLAGS = ["--dtype", "float32", "--enforce-eager", "--max-model-len", "1024"]


def start_stack(
    model: Path,
    run_dir: Path,
    *,
    replicas: int,
    base_port: int,
    balance: str = "least_conn",
    engine_flags: list[str] | None = None,
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
        *(engine_flags if engine_flags is not None else ENGINE_FLAGS),
    ]
    server = Server(f"stack-{balance}", argv, run_dir.parent / f"up-{balance}.log", cpu_env())
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
    return Server("nginx-round-robin", nginx, run_dir / "nginx.log", cpu_env()), f"http://127.0.0.1:{port}"


def stack_status(run_dir: Path) -> dict[str, Any]:
    """`hunyuan-serve status --json` of the stack in run_dir ({} when it does not answer)."""
    import subprocess

    proc = subprocess.run(
        [*HUNYUAN, "status", "--json", "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        cwd=str(REPO),
        check=False,
        timeout=30,
    )
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def all_ready(run_dir: Path, replicas: int) -> bool:
    states = [r.get("state") for r in stack_status(run_dir).get("replicas", [])]
    return len(states) == replicas and all(s == "ready" for s in states)


def start_serial(model: Path, log_dir: Path) -> tuple[Server, str]:
    """The one-at-a-time baseline: one engine, no Nginx, a lock around every request."""
    port = free_port()
    argv = [sys.executable, "-m", "bench.baselines.serial", "--model", str(model), "--port", str(port)]
    server = Server("serial", argv, log_dir / "serial.log", cpu_env())
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
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        "1024",
        "--disable-uvicorn-access-log",
    ]
    server = Server("vllm-openai", argv, log_dir / "vllm-openai.log", cpu_env())
    return server, f"http://127.0.0.1:{port}"


def vllm_ready(url: str) -> bool:
    status, _ = http_json(f"{url}/v1/models", timeout=5)
    return status == 200

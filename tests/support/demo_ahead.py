"""The demo model's one-time conversion, started in a process of its own at the session's start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hunyuan_serve.demo_model import DEMO_MODEL_NAME, default_models_dir, is_complete
from tests.support.stacks import spawn

# On a fresh machine the conversion takes about a minute of one core, and the demo tests come last
# (light_modules_first): converting while the light tests run takes it off the suite's wall time.
# ensure_demo_model's file lock makes the demo fixture wait for this process, or convert itself
# if it got there first.
CONVERT = "from hunyuan_serve.demo_model import ensure_demo_model; ensure_demo_model()"


def wants_demo_model(items: list[pytest.Item]) -> bool:
    return any(item.get_closest_marker("demo") for item in items)


def convert_ahead(items: list[pytest.Item], log: Path) -> subprocess.Popen[bytes] | None:
    """The conversion's process when a selected demo test will need it and it is not cached, else None."""
    if not wants_demo_model(items) or is_complete(default_models_dir(os.environ) / DEMO_MODEL_NAME):
        return None
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # one core: the tests beside it keep the other
    return spawn([sys.executable, "-c", CONVERT], log, env)


def finish(proc: subprocess.Popen[bytes] | None, timeout_s: float = 600.0) -> None:
    """Let a conversion still running at the session's end finish (a kill would leave its temporary
    folder in the cache); past timeout_s it is killed."""
    if proc is None:
        return
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

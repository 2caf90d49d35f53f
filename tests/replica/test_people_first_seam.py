"""A real replica whose vLLM does not run the pausing scheduler: it says so, or does not start."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import httpx
import pytest

from hunyuan_serve.replica.engine.args import SCHEDULER_SEAM_ENV
from tests.support.stacks import cli, free_port, http_ok, spawn, started, stop, tail

pytestmark = pytest.mark.engine

STARTUP_TIMEOUT_S = 400


def _argv(model: Path, port: int) -> list[str]:
    return cli(
        "replica", "--model", str(model), "--port", str(port), "--max-model-len", "512",
        "--kv-cache-memory-bytes", str(64 * 2**20), "--enforce-eager", "true", "--max-num-seqs", "8",
    )  # fmt: skip


def _metric(url: str, name: str) -> float | None:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def test_a_scheduler_that_never_acknowledges_reads_as_people_first_inactive(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    # Built like the pausing scheduler (the start goes on), scheduling as vLLM's own: what a vLLM that
    # stopped calling our schedule() would do.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, SCHEDULER_SEAM_ENV: "unpausing"}
    log = tmp_path / "replica.log"
    ready = http_ok(f"{url}/health")
    with started(_argv(tiny_model_dir, port), log=log, ready=ready, timeout_s=STARTUP_TIMEOUT_S, env=env):
        deep = httpx.get(f"{url}/health", params={"deep": "1"}, timeout=60)
        assert deep.status_code == 200, deep.text  # it still translates: only people-first is off
        body = deep.json()
        assert body["people_first"] == "inactive" and "people-first inactive" in body["reason"]
        assert _metric(url, "hunyuan_people_first_acks") == 0
        # The warm-up and the probe were steps the stat logger saw: the metric says it without a probe.
        assert _metric(url, "hunyuan_people_first_inactive") == 1


def test_a_vllm_that_did_not_build_the_pausing_scheduler_stops_the_start(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    env = {**os.environ, SCHEDULER_SEAM_ENV: "vllm"}  # vLLM's own Scheduler class
    log = tmp_path / "replica.log"
    proc = spawn(_argv(tiny_model_dir, free_port()), log, env)
    try:
        proc.wait(STARTUP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the replica kept running without the pausing scheduler:\n{tail(log)}")
    finally:
        stop(proc)
    said = log.read_text(errors="replace")
    assert proc.returncode != 0
    assert "SchedulerNotBuilt" in said and "did not build the pausing scheduler" in said, tail(log)
    assert re.search(r"vllm(-cpu)? \d+\.\d+", said), tail(log)  # the vLLM named

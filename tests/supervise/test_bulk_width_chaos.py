"""kill -9 of a replica holding bulk work queued under its width: `translate` still finishes the file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from hunyuan_serve.run.state import read_state
from tests.support.stacks import cli, free_ports, started, tail, tiny_engine, wait_until

START_TIMEOUT_S = 420.0  # two vLLM CPU engines loading on two shared cores
STRINGS = 600
# max_num_seqs 8: a full width of 6 sequences, so each batch of the job (16 texts) mostly waits in the
# replica: the queue the kill takes with it.
MAX_NUM_SEQS = 8
_QUEUED = re.compile(r"^hunyuan_bulk_queued\s+([0-9.eE+-]+)\s*$", re.MULTILINE)

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
    pytest.mark.timeout(3 * START_TIMEOUT_S),
]


def _config(work: Path, model: Path) -> tuple[Path, int]:
    port, base, _ = free_ports(3)
    settings = {
        "replicas": 2,
        "base_port": base,
        "run_dir": str(work / "run"),
        "engine": tiny_engine(model, MAX_NUM_SEQS),
        "replica": {"max_tokens": 8, "cache_entries": 0},
        "supervisor": {"probe_interval_s": 0.25, "startup_timeout_s": 400.0, "restart_backoff_base_s": 0.5},
        "nginx": {"port": port, "worker_processes": 1, "read_timeout_s": 120.0},
    }
    config = work / "up.yaml"
    config.write_text(yaml.safe_dump(settings))
    return config, port


def _queued(port: int) -> float:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2, trust_env=False).text
    except httpx.HTTPError:
        return 0.0
    return sum(float(v) for v in _QUEUED.findall(text))


def _ready(run_dir: Path) -> bool:
    state = read_state(run_dir)
    if state is None:
        return False
    return all(r["state"] == "ready" for r in state["replicas"]) and state["nginx"]["ready"] == 2


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = Counter(key for key, _ in pairs)
    assert [k for k, n in keys.items() if n > 1] == [], "a key written twice into the file"
    return dict(pairs)


def test_kill_9_of_a_replica_with_queued_bulk_loses_nothing_and_writes_nothing_twice(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    config, port = _config(tmp_path, tiny_model_dir)
    source = {f"key.{i}": f"Label {i} of the settings page" for i in range(STRINGS)}
    src, dst, report = tmp_path / "en.json", tmp_path / "zh.json", tmp_path / "report.json"
    src.write_text(json.dumps(source, indent=1), encoding="utf-8")
    env = {**os.environ, "HUNYUAN_SERVE_TEST_IGNORE_EOS": "1"}  # every text costs max_tokens
    with started(cli("up", "--config", str(config)), log=tmp_path / "up.log", env=env) as up:
        wait_until(up, tmp_path / "up.log", lambda: _ready(tmp_path / "run"), START_TIMEOUT_S, "both ready")
        state = read_state(tmp_path / "run")
        assert state is not None
        victim = state["replicas"][0]
        cmd = cli("translate", "--url", f"http://127.0.0.1:{port}", "--from", "en", "--to", "zh", str(src))
        cmd += [
            "-o",
            str(dst),
            "--cache",
            str(tmp_path / "cache.sqlite"),
            "--report",
            str(report),
            "--no-progress",
        ]
        job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while (held := _queued(victim["port"])) == 0:  # the job under way there, some of it queued
            assert job.poll() is None and time.monotonic() < deadline, tail(tmp_path / "up.log")
            time.sleep(0.05)
        os.kill(victim["pid"], signal.SIGKILL)
        _, err = job.communicate(timeout=600)
    assert job.returncode in (0, 1), f"rc {job.returncode}: {err}"
    done = json.loads(report.read_text(encoding="utf-8"))
    written = json.loads(dst.read_text(encoding="utf-8"), object_pairs_hook=_once)
    assert held > 0 and list(written) == list(source)  # every key once, in order
    assert done["total"] == STRINGS and done["aborted"] is None
    assert done["translated"] + done["cached"] + done["skipped"] + done["failed"] == STRINGS
    # What failed failed the client's checks of an answer (random tokens), never a lost request.
    assert all(f["problem"].startswith(("missing", "unexpected", "positional", "empty", "control")) for f in
               done["failures"]), done["failures"][:3]  # fmt: skip
    assert done["translated"] > STRINGS // 2
    tally = (
        f"{done['translated']} translated, {done['failed']} failed the checks, {done['requests']} requests"
    )
    print(f"\nkilled with {held:.0f} bulk sequences queued; {tally}; {err.strip()[-99:]}")

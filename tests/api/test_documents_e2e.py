"""A document job survives kill -9: of the replica holding it (another takes it once the lease runs
out, and sends only what the segment cache does not hold), then of `up` and all its processes (a new
`up` on the same run dir, of one replica, finishes it). Real `up`, two replicas on a tiny hy-mt1.5
checkpoint."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from hunyuan_serve.families import HY_MT15
from tests.support.stacks import free_ports, http_ok, replicas_ready, started, tiny_up

pytestmark = [pytest.mark.engine, pytest.mark.nginx, pytest.mark.e2e]

READY_TIMEOUT_S = 600.0
WAIT_S = 600.0
KEY = "sk-docs-e2e-1f2e3d4c5b6a"
LINES = [f"Line number {n} of the report." for n in range(1, 41)]
LEASE_S = 3.0


def _row(run: Path, job_id: str) -> dict[str, Any]:
    with sqlite3.connect(run / "store.sqlite", timeout=10) as db:
        db.row_factory = sqlite3.Row
        row = db.execute(
            "SELECT state, segments_done, segments_total, segments_cached, attempts, lease_owner, error"
            " FROM documents WHERE id = ?",
            (job_id,),
        ).fetchone()
    assert row is not None, f"job {job_id} is not in the store"
    return dict(row)


def _stored(run: Path, before: float) -> int:
    """Segments in the document cache written before a moment. A segment whose translation failed the
    checks (the tiny model's output can be empty) counts as done but is not cached, and is sent again."""
    with sqlite3.connect(run / "document-cache.sqlite", timeout=10) as db:
        return int(db.execute("SELECT COUNT(*) FROM translations WHERE created < ?", (before,)).fetchone()[0])


def _wait(what: str, check: Callable[[], dict[str, Any] | None], timeout_s: float = WAIT_S) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found is not None:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _when(run: Path, job_id: str, condition: Callable[[dict[str, Any]], bool]) -> Callable[[], Any]:
    def check() -> dict[str, Any] | None:
        row = _row(run, job_id)
        assert row["state"] != "error", row["error"]
        return row if condition(row) else None

    return check


def test_a_job_survives_kill_9_of_its_replica_and_of_up(tmp_path_factory: pytest.TempPathFactory) -> None:
    from hunyuan_serve.tiny_model import build_tiny_model

    work = tmp_path_factory.mktemp("documents-e2e")
    model = build_tiny_model(tmp_path_factory.mktemp(f"tiny-{HY_MT15}-"), kind=HY_MT15)
    (work / "keys.txt").write_text(f"{KEY}\n")
    # One segment a request, one request at a time: the job lasts long enough to be killed midway. The
    # answer checks are off: they flag every answer of the tiny model (cut at max_tokens), and a flagged
    # segment is not kept in the document cache, so no answer would be there to resume from.
    (work / "config.yaml").write_text(
        f"replica:\n  document_lease_s: {LEASE_S}\n  document_poll_s: 0.2\n"
        "  document_batch_size: 1\n  document_concurrency: 1\n  qa: 'off'\n"
    )
    port, base = free_ports(2)
    cmd = tiny_up(model, work / "run", port, base, max_tokens=8)
    cmd[cmd.index("--replicas") + 1] = "2"
    cmd += ["--keys-file", str(work / "keys.txt"), "--config", str(work / "config.yaml")]
    url, run = f"http://127.0.0.1:{port}", work / "run"
    headers = {"Authorization": f"DeepL-Auth-Key {KEY}"}
    with started(cmd, log=work / "up.log", ready=replicas_ready(url, 2), timeout_s=READY_TIMEOUT_S) as up:
        files = {"file": ("report.txt", ("\n".join(LINES) + "\n").encode())}
        answer = httpx.post(f"{url}/v2/document", headers=headers, data={"target_lang": "DE"}, files=files)
        assert answer.status_code == 200, answer.text
        job_id, document_key = answer.json()["document_id"], answer.json()["document_key"]
        first = _wait("three segments done", _when(run, job_id, lambda r: r["segments_done"] >= 3))
        holder = int(first["lease_owner"].split("-")[0])
        os.kill(holder, signal.SIGKILL)  # the replica working on the job
        killed_at = time.time()
        second = _wait(
            "another attempt that made progress",
            _when(run, job_id, lambda r: r["attempts"] == 2 and r["segments_done"] > first["segments_done"]),
        )
        # What the first attempt finished came from the cache: the second attempt did not send it.
        assert second["segments_cached"] >= _stored(run, killed_at) >= 1
        family = [psutil.Process(up.pid), *psutil.Process(up.pid).children(recursive=True)]
        for process in family:  # `up` itself first, then everything it started: nothing is left
            process.kill()
        psutil.wait_procs(family, timeout=30)
        stopped, stored = _row(run, job_id), _stored(run, time.time())
        assert stopped["state"] == "translating" and stopped["segments_done"] < len(LINES)
    # One replica finishes it (one lease, one segment at a time): a second would load an engine for nothing.
    again = [*cmd]
    again[again.index("--replicas") + 1] = "1"
    with started(again, log=work / "up-2.log", ready=http_ok(url + "/health"), timeout_s=READY_TIMEOUT_S):
        done = _wait("the job done after the restart", _when(run, job_id, lambda r: r["state"] == "done"))
        assert done["attempts"] >= 3 and done["segments_cached"] == stored >= second["segments_cached"]
        body = {"document_key": document_key}
        status = httpx.post(f"{url}/v2/document/{job_id}", headers=headers, json=body).json()
        assert status["status"] == "done" and status["billed_characters"] == sum(map(len, LINES))
        result = httpx.post(f"{url}/v2/document/{job_id}/result", headers=headers, json=body)
    assert result.status_code == 200
    translated = result.text.split("\n")
    assert len(translated) == len(LINES) + 1 and all(line.strip() for line in translated[:-1])

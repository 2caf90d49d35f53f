"""Size-bounded logs: which files are due, how copies shift, and that writers go on without a lost line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from hunyuan_serve.config import LogsConfig, NginxConfig, build_config
from hunyuan_serve.edge.controller import NginxController
from hunyuan_serve.logrotate import LogFile, due, files_in, rotate, rotate_due, rotated_names
from hunyuan_serve.run.rundir import worker_user
from tests.support.stacks import free_port


def test_rotated_names_run_from_newest_to_oldest() -> None:
    assert [p.name for p in rotated_names(Path("/r/logs/access.log"), 3)] == [
        "access.log.1",
        "access.log.2",
        "access.log.3",
    ]


@pytest.mark.parametrize(
    ("sizes", "limit", "expected"),
    [
        ({"a": 10, "b": 99}, 100, []),
        ({"a": 100, "b": 99}, 100, ["a"]),  # at the limit counts
        ({"a": 500, "b": 101}, 100, ["a", "b"]),
        ({"a": 500}, 0, []),  # 0: rotation off
        ({}, 100, []),  # a file not there yet (a replica not started) is not due
    ],
)
def test_due(sizes: dict[str, int], limit: int, expected: list[str]) -> None:
    files = [LogFile(Path("a")), LogFile(Path("b"))]
    got = due(files, {Path(k): v for k, v in sizes.items()}, limit)
    assert [str(f.path) for f in got] == expected


def test_the_config_fields_and_their_refusals() -> None:
    cfg = build_config({"logs": {"rotate_at_bytes": 1000, "rotate_keep": 2}}, {})
    assert (cfg.logs.rotate_at_bytes, cfg.logs.rotate_keep, cfg.logs.rotate_check_interval_s) == (
        1000,
        2,
        30.0,
    )
    for bad in ({"rotate_keep": 0}, {"rotate_at_bytes": -1}, {"rotate_check_interval_s": 0}):
        with pytest.raises(ValueError, match=r"logs\.rotate_"):
            build_config({"logs": bad}, {})


def test_copies_shift_and_the_oldest_is_dropped(tmp_path: Path) -> None:
    log = tmp_path / "replica-0.log"
    for generation in range(1, 5):
        log.write_text(f"generation {generation}\n")
        rotate(LogFile(log), keep=2)
        assert log.read_text() == ""
    assert (tmp_path / "replica-0.log.1").read_text() == "generation 4\n"
    assert (tmp_path / "replica-0.log.2").read_text() == "generation 3\n"
    assert not (tmp_path / "replica-0.log.3").exists()


def test_a_renamed_log_is_reopened_by_its_writer(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    log.write_text("before\n")
    reopened: list[Path] = []
    assert rotate(LogFile(log, lambda: reopened.append(log)), keep=3) == len("before\n")
    assert reopened == [log] and not log.exists()  # the writer creates it again
    assert (tmp_path / "access.log.1").read_text() == "before\n"


_WRITER = """
import sys, time
with open(sys.argv[1], "ab", buffering=0) as out:
    for i in range(int(sys.argv[2])):
        out.write(b"line %06d\\n" % i)
        time.sleep(0.0005)
"""


def test_a_writer_appending_through_copy_and_truncate_keeps_writing(tmp_path: Path) -> None:
    """Like a replica's stdout: a separate process appends the whole time; every rotation empties the
    file, the next lines land at its start (no hole of zeros), and the copies hold what came before."""
    log = tmp_path / "replica-0.log"
    log.touch()
    count = 4000
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(log), str(count)])
    rotations = 0
    try:
        deadline = time.monotonic() + 30
        while writer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            if log.stat().st_size > 2000:
                rotate(LogFile(log), keep=1000)
                rotations += 1
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.wait()
    assert writer.returncode == 0 and rotations >= 3
    pieces = [*reversed(rotated_names(log, rotations)), log]
    text = b"".join(p.read_bytes() for p in pieces if p.exists())
    assert b"\0" not in text  # O_APPEND: after the truncate the writer went on at offset 0
    lines = text.decode().splitlines()
    assert lines == sorted(lines) and len(set(lines)) == len(lines)
    # A line written between the copy's last read and the truncate is lost: at most one per rotation.
    assert count - rotations <= len(lines) <= count


@pytest.mark.nginx
def test_nginx_reopens_its_logs_on_usr1(tmp_path: Path) -> None:
    """The real Nginx, through the controller's own LogFile: after the rename and USR1 it writes the
    path again, and what it wrote before is in .1."""
    port = free_port()
    nginx = NginxController(NginxConfig(port=port), tmp_path / "nginx")
    user = worker_user()  # as up renders it: root's workers stay root, or they could not open the 0700 prefix
    conf = f"""
{f"user {user};" if user else ""}
daemon off;
pid {tmp_path}/nginx/nginx.pid;
events {{}}
http {{
    access_log {nginx.access_log};
    server {{ listen 127.0.0.1:{port}; location /health {{ return 200 "ok"; }} }}
}}
"""

    async def scenario() -> tuple[str, str]:
        await nginx.start(conf, tmp_path / "nginx.log")
        try:
            async with httpx.AsyncClient(trust_env=False) as client:
                await client.get(f"http://127.0.0.1:{port}/health?before")
                access = next(f for f in nginx.logs() if f.path == nginx.access_log)
                rotate(access, keep=2)
                for _ in range(100):  # the master reopens, then tells its workers
                    await client.get(f"http://127.0.0.1:{port}/health?after")
                    if nginx.access_log.exists() and "after" in nginx.access_log.read_text():
                        break
                    await asyncio.sleep(0.05)
        finally:
            await nginx.stop(5)
        return (tmp_path / "nginx/logs/access.log.1").read_text(), nginx.access_log.read_text()

    rotated, current = asyncio.run(scenario())
    assert "?before" in rotated  # and the requests before the workers reopened it
    assert "?after" in current and "?before" not in current


def test_one_check_rotates_what_is_due_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "replica-0.log").write_text("x" * 200)
    (tmp_path / "replica-1.log").write_text("x" * 10)
    (tmp_path / "notes.txt").write_text("x" * 500)  # not a log of the folder
    events: list[tuple[str, dict[str, Any]]] = []
    cfg = LogsConfig(rotate_at_bytes=100, rotate_keep=2)
    rotate_due(files_in(tmp_path), cfg, lambda event, **fields: events.append((event, fields)))
    assert events == [("log_rotated", {"path": str(tmp_path / "replica-0.log"), "bytes": 200, "kept": 2})]
    assert (tmp_path / "replica-1.log").stat().st_size == 10


def test_a_failed_rotation_is_an_event_not_an_error(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    log.write_text("x" * 200)
    (tmp_path / "access.log.1").mkdir()  # a folder where the copy goes: os.replace fails
    (tmp_path / "access.log.1" / "f").touch()
    events: list[str] = []
    cfg = LogsConfig(rotate_at_bytes=100, rotate_keep=1)
    rotate_due([LogFile(log, lambda: None)], cfg, lambda event, **fields: events.append(event))
    assert events == ["log_rotate_failed"] and log.stat().st_size == 200

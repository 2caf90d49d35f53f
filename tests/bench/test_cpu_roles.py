"""The job row's CPU split: which part of a stack each process is, and the note it prints."""

from __future__ import annotations

import os

import pytest

from bench.likeforlike_job import cpu_note
from bench.procs import ROLES, cpu_by_role, process_role

PY = "/repo/.venv/bin/python"


@pytest.mark.parametrize(
    ("name", "cmdline", "is_root", "role"),
    [
        ("hunyuan-serve", [PY, "/repo/.venv/bin/hunyuan-serve", "up"], True, "supervisor"),
        ("python", [PY, "-m", "hunyuan_serve", "replica", "--config", "r0.yaml"], False, "API processes"),
        ("VLLM::EngineCor", ["VLLM::EngineCore"], False, "engine cores"),
        ("python", ["VLLM::EngineCore"], False, "engine cores"),
        ("nginx", ["nginx: worker process"], False, "Nginx"),
        ("nginx", ["nginx: master process /usr/sbin/nginx -c x.conf"], False, "Nginx"),
        ("nginx", ["nginx: master process /usr/sbin/nginx -c x.conf"], True, "Nginx"),
        ("python", [PY, "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], True, "API processes"),
        ("vllm", [PY, "/repo/.venv/bin/vllm", "serve", "m"], True, "API processes"),
        ("vllm", ["/repo/.venv/bin/vllm", "serve", "m"], True, "API processes"),
        ("python", [PY, "bench.py", "serve", "vllm"], False, "other"),
        ("python", [PY, "-c", "from multiprocessing.resource_tracker import main"], False, "other"),
        ("python", [PY, "-m", "hunyuan_serve", "gateway"], False, "other"),
    ],
)
def test_process_role(name: str, cmdline: list[str], is_root: bool, role: str) -> None:
    assert process_role(name, cmdline, is_root) == role


def test_cpu_by_role_counts_this_process_as_the_root() -> None:
    sum(i * i for i in range(200_000))  # some CPU of our own, so the root's share is not zero
    totals = cpu_by_role([os.getpid()])
    assert set(totals) == set(ROLES)
    assert totals["supervisor"] > 0


def test_cpu_by_role_of_a_gone_process_is_all_zero() -> None:
    assert set(cpu_by_role([2**22 + 1]).values()) == {0.0}


def test_cpu_note_gives_each_part_per_string_and_leaves_out_the_idle() -> None:
    roles = {"engine cores": 10.0, "API processes": 2.0, "Nginx": 0.2, "supervisor": 0.001, "other": 0.0}
    note = cpu_note(roles, 1.0, 2000)
    assert note == (
        "CPU-s (CPU-us a string): engine cores 10.00 (5000 us) / API processes 2.00 (1000 us) / "
        "Nginx 0.20 (100 us) / translate client 1.00 (500 us)"
    )

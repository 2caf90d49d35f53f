"""A SIGKILL-ed `up` leaves nothing behind: the replica's parent watch and the leftover finders, on fakes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from hunyuan_serve.config import build_config
from hunyuan_serve.config.replica import PARENT_PID_ENV
from hunyuan_serve.edge.controller import leftover_master
from hunyuan_serve.replica.command import watch_parent
from hunyuan_serve.replica.lifecycle import parent_gone, watched_parent
from hunyuan_serve.run.procs import replicas_of

CONF = Path("/run/hs/nginx/nginx.conf")
MASTER = f"nginx: master process /usr/sbin/nginx -p /run/hs/nginx -c {CONF} -e /run/hs/nginx/logs/error.log"


def test_a_replica_up_started_watches_up_and_a_standalone_one_nothing() -> None:
    assert watched_parent({PARENT_PID_ENV: "4242"}) == 4242
    # systemd, Kubernetes, a shell: no variable; a broken one or init's pid is no parent to watch.
    for env in ({}, {PARENT_PID_ENV: ""}, {PARENT_PID_ENV: "up"}, {PARENT_PID_ENV: "1"}):
        assert watched_parent(env) is None


def test_the_parent_is_gone_once_the_ppid_no_longer_names_it() -> None:
    assert not parent_gone(4242, 4242)
    assert parent_gone(4242, 1)  # re-parented to init
    assert parent_gone(4242, 77)  # or to a subreaper
    assert not parent_gone(None, 1)  # standalone: init as parent is normal


def test_the_check_is_a_config_field_on_by_default() -> None:
    assert build_config({}, {}).replica.parent_check_s == 1.0
    assert build_config({"replica": {"parent_check_s": 0}}, {}).replica.parent_check_s == 0


def test_the_watch_stops_the_server_once_the_parent_is_gone() -> None:
    stopped: list[bool] = []
    asyncio.run(watch_parent(os.getppid() + 1, 0.01, lambda: stopped.append(True)))
    assert stopped == [True]


def test_the_watch_keeps_the_server_while_the_parent_is_there() -> None:
    stopped: list[bool] = []

    async def watch_a_while() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(watch_parent(os.getppid(), 0.01, lambda: stopped.append(True)), 0.1)

    asyncio.run(watch_a_while())
    assert stopped == []


def test_the_leftover_nginx_is_the_master_of_this_config_named_by_the_pid_file() -> None:
    titles = {
        10: MASTER,
        11: "nginx: worker process",
        12: MASTER.replace("/run/hs/", "/run/other/"),
        13: MASTER.replace("nginx.conf", "nginx.conf.old"),
        14: "python -m http.server",
    }
    assert leftover_master("10\n", titles.get, CONF) == 10
    for text in ("11", "12", "13", "14", "99", "", "junk", None, "1"):
        assert leftover_master(text, titles.get, CONF) is None, text


def test_leftover_replicas_are_those_running_a_config_of_this_run_dir() -> None:
    run_dir = Path("/run/hs")
    commands = {
        20: "/venv/bin/python -m hunyuan_serve replica --config /run/hs/replica-0.yaml --port 8001",
        21: "/venv/bin/python -m hunyuan_serve replica --config /run/hs/replica-1.yaml --port 8002",
        22: "/venv/bin/python -m hunyuan_serve replica --config /run/hs2/replica-0.yaml --port 9001",
        23: "/venv/bin/python -m hunyuan_serve up --run-dir /run/hs",
        24: "vim /run/hs/replica-0.yaml",
    }
    assert replicas_of(commands, run_dir) == [20, 21]
    assert replicas_of({}, run_dir) == []

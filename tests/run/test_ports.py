"""Busy ports are reported with the process that holds them; the state file and status helpers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from hunyuan_serve.run.ports import LOWEST_PORT, ephemeral_range, free_ports, port_holders, port_problem
from hunyuan_serve.run.state import read_state, write_json_atomic
from hunyuan_serve.supervise.status import collect_status, format_status, parse_in_flight
from tests.support.stacks import free_port


def test_free_port_has_no_problem() -> None:
    assert port_problem("127.0.0.1", free_port()) is None


def test_busy_port_names_the_holder() -> None:
    port = free_port()
    code = (
        f"import socket,time;s=socket.socket();s.bind(('127.0.0.1',{port}));s.listen();"
        "print('ok',flush=True);time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
        problem = port_problem("127.0.0.1", port)
        assert problem is not None
        assert f"port {port} on 127.0.0.1 is in use by pid {holder.pid}" in problem
        assert "socket.socket()" in problem
        assert port_holders(port) == [problem.split(" is in use by ")[1]]
    finally:
        holder.kill()
        holder.wait()


def test_a_port_an_outgoing_connection_holds_is_named_so() -> None:
    # A client's local port, drawn by the kernel from the ephemeral range: nothing listens on it, yet it
    # cannot be bound; a replica given such a port would not start.
    with (
        socket.create_server(("127.0.0.1", 0)) as server,
        socket.create_connection(server.getsockname()[:2]) as client,
        server.accept()[0],
    ):
        port = client.getsockname()[1]
        problem = port_problem("127.0.0.1", port)
    low, high = ephemeral_range()
    assert low <= port <= high
    assert problem == (
        f"port {port} on 127.0.0.1 is in use by a connection, and nothing listens on it: the kernel "
        f"lends ports {low}-{high} to outgoing connections, so choose one below {low}"
    )


def test_free_ports_are_consecutive_bindable_and_below_the_ephemeral_range() -> None:
    ports = free_ports(3)
    assert ports == [ports[0], ports[0] + 1, ports[0] + 2]
    assert ports[0] >= LOWEST_PORT and ports[-1] < ephemeral_range()[0]
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_parse_in_flight() -> None:
    text = "# HELP x\nhunyuan_requests_in_flight 3.0\nhunyuan_requests_in_flight_total 9\n"
    assert parse_in_flight(text) == 3.0
    assert parse_in_flight('hunyuan_requests_in_flight{replica="a"} 2\n') == 2.0
    assert parse_in_flight("other 1\n") is None


def test_status_of_a_stopped_up(tmp_path: Path) -> None:
    assert collect_status(tmp_path) is None
    write_json_atomic(
        tmp_path / "state.json",
        {
            "pid": os.getpid(),
            "running": False,
            "run_dir": str(tmp_path),
            "model": "m",
            "replicas": [
                {
                    "name": "replica-0",
                    "device": "cpu:0",
                    "port": 1,
                    "pid": 5,
                    "state": "ready",
                    "restarts": 0,
                    "last_probe_ms": 1.0,
                    "reason": "health 200",
                }
            ],
            "nginx": {"pid": None, "port": 8080, "listen": "127.0.0.1", "ready": 1},
        },
    )
    assert read_state(tmp_path) is not None
    status = collect_status(tmp_path)
    assert status is not None and status["running"] is False
    assert status["replicas"][0]["state"] == "stopped" and status["replicas"][0]["pid"] is None
    table = format_status(status)
    assert "replica-0" in table and "up: not running" in table

"""The `config`, `render` and `up` commands in-process, up to the point where `up` would start processes."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import socket
from pathlib import Path

import pytest
import yaml

from hunyuan_serve import render_command
from hunyuan_serve.config import ConfigError
from hunyuan_serve.run import reload_wait
from hunyuan_serve.supervise import flags, reload_client
from tests.gpu.test_cuda_untouched import _model


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers(dest="command", required=True)
    flags.add_parser(subparsers)
    render_command.add_parser(subparsers)
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_config_prints_the_effective_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "c.yaml"
    file.write_text("replicas: 3\nnginx:\n  keepalive: 8\n")
    assert _run(["config", "--config", str(file), "--port", "9090", "--probe-timeout-s", "0.5"]) == 0
    data = yaml.safe_load(capsys.readouterr().out)
    assert data["replicas"] == 3 and data["nginx"]["keepalive"] == 8 and data["nginx"]["port"] == 9090
    assert data["supervisor"]["probe_timeout_s"] == 0.5


def test_bad_key_is_named(tmp_path: Path) -> None:
    file = tmp_path / "c.yaml"
    file.write_text("nginx:\n  keep_alive: 8\n")
    with pytest.raises(ConfigError, match=r"nginx\.keep_alive"):
        _run(["config", "--config", str(file)])


def test_render_nginx_and_systemd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi: the replicas are planned on CPU
    model = _model(tmp_path)
    flags = ["--replicas", "2", "--base-port", "9100", "--balance", "round_robin", "--model", str(model)]
    assert _run(["render", "nginx", *flags]) == 0
    text = capsys.readouterr().out
    assert "server 127.0.0.1:9100 " in text and "server 127.0.0.1:9101 " in text and "least_conn" not in text
    # The stack `up` places: the checkpoint's name and family, and the cap per replica (what it runs
    # and lets wait: max_in_flight 256 + max_queued 2048).
    assert re.search(r'"status":"ready","model":"[^"]*Hunyuan-MT-7B","family":"hunyuan-mt"', text)
    assert text.count("max_conns=2304;") == 2
    assert _run(["render", "nginx", "--starting", *flags]) == 0
    assert capsys.readouterr().out.count("max_conns=2304 down;") == 2
    with pytest.raises(ConfigError, match="--starting is an option of render nginx"):
        _run(["render", "systemd", "--starting"])
    assert _run(["render", "systemd", "--drain-timeout-s", "100"]) == 0
    unit = capsys.readouterr().out
    assert "ExecStart=" in unit and " up --config /etc/hunyuan-serve/config.yaml" in unit
    assert int(unit.split("TimeoutStopSec=")[1].split()[0]) > 100


def test_up_on_a_busy_port_fails_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code = _run(["up", "--port", str(port), "--run-dir", str(tmp_path), "--model", "/nonexistent"])
    assert code == 1
    assert f"port {port} on 127.0.0.1 is in use by pid " in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--nginx-listen", "0.0.0.0"], "nginx.listen 0.0.0.0 is not loopback"),
        (["--peer-secret-file", "/nonexistent/peer.secret"], "auth.peer_secret_file: cannot read"),
    ],
)
def test_up_refuses_an_unguarded_or_unreadable_auth_setting_as_a_config_error(
    tmp_path: Path, flags: list[str], named: str
) -> None:
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError, match=named):  # the CLI prints it and exits 2
        _run(["up", "--run-dir", str(run_dir), "--model", "/nonexistent", *flags])
    assert not run_dir.exists()


class _StepClock:
    """A sync clock for `reload`'s wait: each sleep passes its time at once; sleeps are counted."""

    def __init__(self) -> None:
        self.t, self.sleeps = 0.0, 0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        self.sleeps += 1


def test_reload_wait_gives_up_at_its_deadline_on_the_injected_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No outcome in the events: `reload` says so once timeout_s has passed on its clock, not before."""
    clock = _StepClock()
    events = tmp_path / "events.jsonl"
    events.write_text('{"event": "reload_requested", "reload": 3}\n', encoding="utf-8")
    code = reload_client._await_reload(events, 0, os.getpid(), 1.0, now=clock.now, sleep=clock.sleep)
    assert code == 1 and clock.t >= 1.0
    assert clock.sleeps == math.ceil(1.0 / reload_wait.RELOAD_POLL_S)
    assert "reload 3 has not ended within 1s" in capsys.readouterr().err


def test_reload_wait_prints_the_outcome_once_the_events_have_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = _StepClock()
    events = tmp_path / "events.jsonl"
    lines = [
        {"event": "reload_requested", "reload": 2},
        {"event": "reload_refused", "reload": 2, "error": "bad key"},
    ]
    events.write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    code = reload_client._await_reload(events, 0, os.getpid(), 1.0, now=clock.now, sleep=clock.sleep)
    assert code == 1 and clock.sleeps == 0
    assert "reload 2 refused, nothing was changed: bad key" in capsys.readouterr().err

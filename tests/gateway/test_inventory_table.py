"""The gateway's inventory: a table of files and what each gives or why it is refused; the CLI's exits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hunyuan_serve.cli import main
from hunyuan_serve.config import ConfigError
from hunyuan_serve.gateway.command import format_inventory
from hunyuan_serve.gateway.discovery import status_reason
from hunyuan_serve.gateway.inventory import load_inventory

# Plain HTTP on a private network the tests trust: the peer secret may go there (allow_plain).
HOSTS = [
    {"name": "a", "url": "http://10.77.0.2:8080", "allow_plain": True},
    {"name": "b", "url": "http://10.77.0.3:8080/", "allow_plain": True},
]

REFUSED: list[tuple[Any, str]] = [
    ([1, 2], "must be a mapping"),
    ({}, "hosts: Field required"),
    ({"hosts": []}, "hosts: list at least one host"),
    ({"hosts": None}, "hosts: should be a list"),
    ({"hosts": "a"}, "hosts: should be a list"),
    ({"hosts": HOSTS, "bogus": 1}, "bogus: unknown key"),
    ({"hosts": [{"name": "a", "url": "http://h:1", "port": 2}]}, "hosts[0].port: unknown key"),
    ({"hosts": HOSTS, "tls_nmae": "r.hs"}, "tls_nmae: unknown key (did you mean tls_name?)"),
    ({"hosts": [{"name": "a", "url": "http://h:1", "allow_plian": True}]}, "(did you mean allow_plain?)"),
    ({"hosts": [{"name": "a"}]}, "hosts[0].url: Field required"),
    ({"hosts": [{"name": "a b", "url": "http://h:1"}]}, "hosts[0].name: 'a b' is not a host name"),
    ({"hosts": [{"name": "a", "url": "h:1"}]}, "hosts[0].url: 'h:1' is not a host URL"),
    ({"hosts": [{"name": "a", "url": "http://h:99999"}]}, "hosts[0].url: 'http://h:99999': the port is not"),
    ({"hosts": [{"name": "a", "url": "http://h:0"}]}, "hosts[0].url: 'http://h:0': the port is not"),
    ({"hosts": [{"name": "a", "url": "http://h:1/api"}]}, "is not a host URL"),
    ({"hosts": [HOSTS[0], {"name": "a", "url": "http://h:1"}]}, "hosts: name a listed more than once"),
    ({"hosts": [HOSTS[0], {"name": "c", "url": HOSTS[0]["url"]}]}, "url http://10.77.0.2:8080 listed more"),
    (
        {"hosts": HOSTS, "gateway": {"probe_interval_s": 0}},
        "gateway.probe_interval_s: Input should be greater",
    ),
    ({"hosts": HOSTS, "gateway": {"probe_every": 1}}, "gateway.probe_every: unknown key"),
    ({"hosts": HOSTS, "nginx": {"port": 0}}, "nginx.port: Input should be greater than or equal to 1"),
    (
        {"hosts": HOSTS, "auth": {"peer_secret_file": "/s"}},
        "auth.peer_secret_file: name the secret as the top-level peer_secret_file",
    ),
]


@pytest.mark.parametrize(("data", "problem"), REFUSED)
def test_a_bad_inventory_is_refused_naming_the_key_and_the_file(
    tmp_path: Path, data: Any, problem: str
) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        load_inventory(path)
    # One problem on one line: no pydantic noise ("Value error", a min_length for the entry it dropped).
    message = str(err.value)
    assert message.startswith(f"inventory {path}: ") and problem in message, message
    assert "Tuple should" not in message and "\n" not in message and "Value error" not in message


def test_a_good_inventory_gives_its_hosts_settings_and_the_secret_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    data = {
        "peer_secret_file": "peer.secret",
        "hosts": HOSTS,
        "gateway": {"host_down_after": 5},
        "nginx": {"listen": "0.0.0.0", "port": 9000},
        "auth": {"allow_open": True},
    }
    path.write_text(yaml.safe_dump(data))
    inventory = load_inventory(path)
    assert [(h.name, h.url) for h in inventory.hosts] == [
        ("a", HOSTS[0]["url"]),
        ("b", "http://10.77.0.3:8080"),
    ]
    assert inventory.gateway.host_down_after == 5 and inventory.gateway.probe_interval_s == 0.5
    cfg = inventory.serve_config()
    assert cfg.auth.peer_secret_file == str(tmp_path / "peer.secret") and cfg.auth.allow_open
    assert (cfg.nginx.listen, cfg.nginx.port) == ("0.0.0.0", 9000)


def test_unreadable_or_invalid_yaml_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read inventory"):
        load_inventory(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: [")
    with pytest.raises(ConfigError, match=f"inventory {bad} is not valid YAML") as err:
        load_inventory(bad)
    assert "\n" not in str(err.value) and "at line 1, column 9" in str(err.value)


def test_the_command_exits_2_on_a_bad_inventory_and_1_without_a_running_gateway(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"hosts": HOSTS, "typo": True}))
    assert main(["gateway", "--inventory", str(path), "--run-dir", str(tmp_path / "run")]) == 2
    assert "typo: unknown key" in capsys.readouterr().err
    assert main(["gateway", "--run-dir", str(tmp_path / "run")]) == 2
    assert "--inventory FILE is required" in capsys.readouterr().err
    assert main(["gateway", "status", "--run-dir", str(tmp_path / "run")]) == 1
    assert "no gateway has run" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["0", "65536", "99999", "-1"])
def test_a_port_flag_out_of_range_is_refused_like_the_files_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], port: str
) -> None:
    # It was copied in unchecked, and the port check's bind() raised OverflowError with a traceback.
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"hosts": HOSTS}))
    argv = ["gateway", "--inventory", str(path), "--run-dir", str(tmp_path / "run"), "--port", port]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hunyuan-serve: --port {port}: port: Input should be") and err.count("\n") == 1


def test_the_command_refuses_a_secret_file_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"hosts": HOSTS, "peer_secret_file": "missing.secret"}))
    # A mistake in the inventory's files exits 2, as a mistake in the inventory does, before any run dir.
    files: list[tuple[str | bytes | None, str]] = [(None, "cannot read"), ("short", "16 or more")]
    for text, problem in [*files, ("", "is empty"), (b"\xff", "UTF-8")]:
        secret = tmp_path / "missing.secret"
        if isinstance(text, bytes):
            secret.write_bytes(text)
        elif text is not None:
            secret.write_text(text)
        assert main(["gateway", "--inventory", str(path), "--run-dir", str(tmp_path / "run")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{secret}" in err and problem in err, err
        assert "Errno" not in err and not (tmp_path / "run").exists()


def test_status_table_has_a_line_per_replica_and_one_for_a_host_without_any() -> None:
    replica = {
        "name": "replica-0",
        "addr": "10.77.0.2:8101",
        "state": "ready",
        "last_probe_ms": 2.5,
        "reason": "ok",
    }
    state = {
        "running": True,
        "pid": 7,
        "run_dir": "/r",
        "hosts": [
            {"name": "a", "state": "up", "model": "tencent/Hy-MT2", "replicas": [replica]},
            {"name": "b", "state": "down", "reason": "3 failed poll(s): timeout", "replicas": []},
        ],
        "nginx": {"pid": 8, "listen": "0.0.0.0", "port": 8080, "ready": 1, "replicas": 1},
    }
    lines = format_inventory(state).splitlines()
    head = ["HOST", "HOST_STATE", "MODEL", "REPLICA", "ADDR", "STATE", "PROBE_MS", "REASON"]
    assert lines[0].split() == head
    assert lines[1].split() == [
        "a",
        "up",
        "tencent/Hy-MT2",
        "replica-0",
        "10.77.0.2:8101",
        "ready",
        "2.5",
        "ok",
    ]
    assert lines[2].split()[:3] == ["b", "down", "-"] and lines[2].endswith("3 failed poll(s): timeout")
    assert lines[-1] == "nginx: pid 8 on 0.0.0.0:8080, 1 of 1 replica(s) in the upstream"


def test_the_run_dir_is_absolute_since_nginx_reads_its_prefix_from_it(tmp_path: Path) -> None:
    import argparse

    from hunyuan_serve.gateway.command import gateway_run_dir

    assert gateway_run_dir(argparse.Namespace(run_dir="run"), None) == Path.cwd() / "run"


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (403, "<html>forbidden</html>", "HTTP 403: the host refused the peer secret"),
        (404, "", "HTTP 404: no /_hs/replicas there (is the url a hunyuan-serve `up`'s Nginx"),
        (502, "bad\n  gateway\n", "HTTP 502: bad gateway"),
        (500, "", "HTTP 500"),
    ],
)
def test_a_hosts_refusal_is_one_line_that_says_what_to_check(status: int, body: str, reason: str) -> None:
    # A wrong port answered "HTTP 404: " before, which says nothing to someone writing their inventory.
    found = status_reason(status, body)
    assert found.startswith(reason) and "\n" not in found and not found.endswith(": ")

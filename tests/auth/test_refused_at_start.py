"""A keys file or peer secret others may read: `up`, `replica` and `gateway` refuse to start, naming the
file and `chmod 600`, before any run dir, port, engine or Nginx exists."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.support.stacks import cli, free_port

SECRET = "peer-secret-0123456789abcdef"


def _open_secret(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o644)  # as `echo KEY > keys.txt` leaves it under the usual umask 022
    return path


def _refused(argv: list[str], named: Path) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"{named} has mode 0644: others may read it; run: chmod 600 {named}" in done.stderr
    return done.stderr


def test_up_refuses_a_keys_file_others_may_read(tmp_path: Path) -> None:
    keys = _open_secret(tmp_path / "keys.txt", "sk-open-0123456789")
    run_dir = tmp_path / "run"
    argv = cli("up", "--keys-file", str(keys), "--run-dir", str(run_dir), "--port", str(free_port()))
    assert "auth.keys_file" in _refused([*argv, "--model", str(tmp_path / "no-model")], keys)
    assert not run_dir.exists()  # nothing written, so nothing half-started


def test_a_replica_refuses_a_peer_secret_others_may_read(tmp_path: Path) -> None:
    secret = _open_secret(tmp_path / "peer.secret", SECRET)
    port = free_port()
    argv = cli("replica", "--peer-secret-file", str(secret), "--port", str(port), "--stand-in", "true")
    assert "auth.peer_secret_file" in _refused([*argv, "--model", str(tmp_path / "no-model")], secret)


def test_the_gateway_refuses_a_peer_secret_others_may_read(tmp_path: Path) -> None:
    secret = _open_secret(tmp_path / "peer.secret", SECRET)
    run_dir = tmp_path / "gateway-run"
    inventory = tmp_path / "inventory.yaml"
    hosts = [{"name": "a", "url": "http://10.77.0.2:8080", "allow_plain": True}]
    data = {"hosts": hosts, "peer_secret_file": str(secret), "run_dir": str(run_dir)}
    inventory.write_text(yaml.safe_dump(data))
    _refused(cli("gateway", "--inventory", str(inventory)), secret)
    assert not run_dir.exists()

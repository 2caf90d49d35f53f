"""`up` refuses a bad TLS pair before it makes anything: an expired certificate, a key of another pair,
a key others may read; the edge's pair (nginx.tls_*) and the replicas' own (replica.tls_*), each named in
its refusal, exit 1 (2 for the key others may read, as every secret file), and no run directory (so no
lock, config or events file) left behind."""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.stacks import cli, free_ports
from tests.support.tls_certs import DAY, make_ca, other_key


def _up(tmp_path: Path, model: Path, section: str, cert: Path, key: Path) -> subprocess.CompletedProcess[str]:
    port, tls_port, base = free_ports(3)
    nginx: dict[str, object] = {"port": port}
    settings = {
        "replicas": 1,
        "base_port": base,
        "run_dir": str(tmp_path / "run"),
        "engine": {"model": str(model), "stand_in": True},
        "nginx": nginx,
    }
    if section == "nginx":
        nginx.update(tls_port=tls_port, tls_cert=str(cert), tls_key=str(key))
    else:
        settings["replica"] = {"tls_cert": str(cert), "tls_key": str(key)}
    config = tmp_path / "up.yaml"
    config.write_text(yaml.safe_dump(settings))
    return subprocess.run(cli("up", "--config", str(config)), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("section", ["nginx", "replica"])
@pytest.mark.parametrize("fault", ["expired", "mismatched", "readable"])
def test_up_refuses_a_bad_pair_naming_the_reason(
    tiny_model_dir: Path, tmp_path: Path, section: str, fault: str
) -> None:
    ca = make_ca(tmp_path / "ca")
    now = datetime.datetime.now(datetime.UTC)
    if fault == "expired":
        pair = ca.issue(tmp_path, "edge", not_before=now - 30 * DAY, not_after=now - DAY)
    else:
        pair = ca.issue(tmp_path, "edge")
    key = other_key(tmp_path / "other.key") if fault == "mismatched" else pair.key
    if fault == "readable":
        key.chmod(0o644)
    done = _up(tmp_path, tiny_model_dir, section, pair.cert, key)
    assert done.returncode == (2 if fault == "readable" else 1), done.stdout + done.stderr
    why = {
        "expired": f"{section}.tls_cert {pair.cert} expired on ",
        "mismatched": f"{section}.tls_key {key} does not match the certificate",
        "readable": f"{section}.tls_key {key} has mode 0644: others may read it; run: chmod 600 {key}",
    }[fault]
    assert f": {why}" in done.stderr or f"; {why}" in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()  # no run dir, so no lock, config or events file


def test_a_key_others_may_read_is_one_refusal_with_the_pairs_other_faults(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Exit 2, as for every secret file others may read, yet the expiry is named in the same refusal so
    that chmod is not followed by a second surprise."""
    ca = make_ca(tmp_path / "ca")
    now = datetime.datetime.now(datetime.UTC)
    pair = ca.issue(tmp_path, "edge", not_before=now - 30 * DAY, not_after=now - DAY)
    pair.key.chmod(0o644)
    done = _up(tmp_path, tiny_model_dir, "nginx", pair.cert, pair.key)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"nginx.tls_key {pair.key} has mode 0644: others may read it" in done.stderr
    assert f"nginx.tls_cert {pair.cert} expired on " in done.stderr
    assert not (tmp_path / "run").exists()

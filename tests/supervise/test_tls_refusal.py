"""`up` refuses a bad TLS pair before it starts anything: an expired certificate, a key of another pair,
a key others may read; each named in its refusal, and no Nginx config or events file written."""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.stacks import cli, free_ports
from tests.support.tls_certs import DAY, make_ca, other_key


def _up(tmp_path: Path, model: Path, cert: Path, key: Path) -> subprocess.CompletedProcess[str]:
    port, tls_port, base = free_ports(3)
    settings = {
        "replicas": 1,
        "base_port": base,
        "run_dir": str(tmp_path / "run"),
        "engine": {"model": str(model), "stand_in": True},
        "nginx": {"port": port, "tls_port": tls_port, "tls_cert": str(cert), "tls_key": str(key)},
    }
    config = tmp_path / "up.yaml"
    config.write_text(yaml.safe_dump(settings))
    return subprocess.run(cli("up", "--config", str(config)), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("fault", ["expired", "mismatched", "readable"])
def test_up_refuses_a_bad_pair_naming_the_reason(tiny_model_dir: Path, tmp_path: Path, fault: str) -> None:
    ca = make_ca(tmp_path / "ca")
    now = datetime.datetime.now(datetime.UTC)
    if fault == "expired":
        pair = ca.issue(tmp_path, "edge", not_before=now - 30 * DAY, not_after=now - DAY)
    else:
        pair = ca.issue(tmp_path, "edge")
    key = other_key(tmp_path / "other.key") if fault == "mismatched" else pair.key
    if fault == "readable":
        key.chmod(0o644)
    done = _up(tmp_path, tiny_model_dir, pair.cert, key)
    # 1: a failed preflight row; 2: a refused setting (a key others may read is refused with the other
    # secret files, before the preflight)
    assert done.returncode in (1, 2), done.stdout + done.stderr
    why = {
        "expired": f"nginx.tls_cert {pair.cert} expired on ",
        "mismatched": f"nginx.tls_key {key} does not match the certificate",
        "readable": f"nginx.tls_key {key} has mode 0644: others may read it; run: chmod 600 {key}",
    }[fault]
    assert why in done.stderr, done.stderr
    run = tmp_path / "run"
    assert not (run / "nginx" / "nginx.conf").exists() and not (run / "events.jsonl").exists()

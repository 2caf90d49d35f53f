"""doctor's tls rows over facts from real PEM files: ok saying what the pair is, one FAIL row per fault;
its secret files row, whose FAIL is exit 2 as at every command refusing a secret file."""

from __future__ import annotations

import dataclasses
import datetime
import re
import subprocess
from pathlib import Path

from hunyuan_serve.auth import exposed_secrets
from hunyuan_serve.config import NginxConfig, ServeConfig
from hunyuan_serve.doctor import run_checks
from hunyuan_serve.edge.tls import check_pair
from tests.gpu.test_doctor_checks import HEALTHY
from tests.support.stacks import cli, free_port
from tests.support.tls_certs import DAY, make_ca, other_key


def _rows(nginx: NginxConfig, name: str = "tls") -> list[tuple[str, str]]:
    exposed = tuple(exposed_secrets(ServeConfig(nginx=nginx)))
    facts = dataclasses.replace(HEALTHY, tls=check_pair(nginx), exposed=exposed)
    return [(c.status, c.detail) for c in run_checks(facts) if c.name == name]


def test_the_tls_rows_say_off_ok_or_one_fault_each(tmp_path: Path) -> None:
    assert _rows(NginxConfig()) == [("ok", "off: plain HTTP only (nginx.tls_cert unset)")]
    ca = make_ca(tmp_path)
    good = ca.issue(tmp_path, "good", ["api.example"])
    ((status, detail),) = _rows(
        NginxConfig(tls_cert=str(good.cert), tls_key=str(good.key), tls_host="api.example")
    )
    assert status == "ok" and detail.startswith("api.example; valid until") and "covers api.example" in detail
    now = datetime.datetime.now(datetime.UTC)
    old = ca.issue(tmp_path, "old", not_before=now - 9 * DAY, not_after=now - DAY)
    stray = other_key(tmp_path / "stray.key")
    stray.chmod(0o640)
    nginx = NginxConfig(tls_cert=str(old.cert), tls_key=str(stray))
    assert _rows(nginx) == [  # as docs/tls.md shows them
        ("FAIL", f"nginx.tls_key {stray} does not match the certificate (another key pair's)"),
        ("FAIL", f"nginx.tls_cert {old.cert} expired on {old_until(old.cert)} UTC: install a renewed one"),
    ]
    exposed = f"nginx.tls_key {stray} has mode 0640: others may read it; run: chmod 600 {stray}"
    assert _rows(nginx, "secret files") == [("FAIL", exposed)]


def old_until(cert: Path) -> str:
    from cryptography import x509

    return f"{x509.load_pem_x509_certificate(cert.read_bytes()).not_valid_after_utc:%Y-%m-%d %H:%M}"


def _secret_row(stdout: str) -> tuple[str, str]:
    found = re.search(r"^(\S+)\s+secret files\s+(.*)$", stdout, re.M)
    assert found is not None, stdout
    return found.group(1), found.group(2)


def test_doctor_exits_2_on_a_keys_file_others_may_read(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("sk-open-0123456789\n")
    keys.chmod(0o644)
    argv = cli("doctor", "--keys-file", str(keys), "--port", str(free_port()))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    why = f"auth.keys_file {keys} has mode 0644: others may read it; run: chmod 600 {keys}"
    assert _secret_row(done.stdout) == ("FAIL", why)
    keys.chmod(0o600)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert _secret_row(done.stdout) == ("ok", "auth.keys_file: readable by their owner only")
    assert done.returncode in (0, 1)  # the host's other rows are this machine's own

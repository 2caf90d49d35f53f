"""doctor's tls row over facts from real PEM files: ok saying what the pair is, FAIL naming each fault."""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path

from hunyuan_serve.config import NginxConfig
from hunyuan_serve.doctor import run_checks
from hunyuan_serve.edge.tls import check_pair
from tests.gpu.test_doctor_checks import HEALTHY
from tests.support.tls_certs import DAY, make_ca, other_key


def _row(nginx: NginxConfig) -> tuple[str, str]:
    facts = dataclasses.replace(HEALTHY, tls=check_pair(nginx))
    row = next(c for c in run_checks(facts) if c.name == "tls")
    return row.status, row.detail


def test_the_tls_row_says_off_ok_or_each_fault(tmp_path: Path) -> None:
    assert _row(NginxConfig()) == ("ok", "off: plain HTTP only (nginx.tls_cert unset)")
    ca = make_ca(tmp_path)
    good = ca.issue(tmp_path, "good", ["api.example"])
    status, detail = _row(NginxConfig(tls_cert=str(good.cert), tls_key=str(good.key), tls_host="api.example"))
    assert status == "ok" and detail.startswith("api.example; valid until") and "covers api.example" in detail
    now = datetime.datetime.now(datetime.UTC)
    old = ca.issue(tmp_path, "old", not_before=now - 9 * DAY, not_after=now - DAY)
    stray = other_key(tmp_path / "stray.key")
    stray.chmod(0o640)
    status, detail = _row(NginxConfig(tls_cert=str(old.cert), tls_key=str(stray)))
    assert status == "FAIL"
    assert detail == "; ".join(
        [
            f"nginx.tls_key {stray} has mode 0640: others may read it; run: chmod 600 {stray}",
            f"nginx.tls_key {stray} does not match the certificate (another key pair's)",
            f"nginx.tls_cert {old.cert} expired on {old_until(old.cert)} UTC: install a renewed one",
        ]
    )


def old_until(cert: Path) -> str:
    from cryptography import x509

    return f"{x509.load_pem_x509_certificate(cert.read_bytes()).not_valid_after_utc:%Y-%m-%d %H:%M}"

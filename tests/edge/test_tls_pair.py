"""edge/tls.py over real PEM files made here: a good pair passes, and each fault is named with its fix."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from hunyuan_serve.config import NginxConfig
from hunyuan_serve.edge.tls import check_pair, checked_host, covers
from tests.support.tls_certs import CA, DAY, make_ca, other_key


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca(tmp_path_factory.mktemp("ca"))


def _nginx(cert: Path, key: Path, **extra: object) -> NginxConfig:
    return NginxConfig.model_validate({"tls_cert": str(cert), "tls_key": str(key), **extra})


def test_a_good_pair_has_no_problem_and_says_what_it_is(ca: CA, tmp_path: Path) -> None:
    pair = ca.issue(tmp_path, "edge", ["api.example", "*.api.example"])
    report = check_pair(_nginx(pair.cert, pair.key, tls_host="eu.api.example"))
    assert report is not None and report.problems == ()
    assert report.summary.startswith("api.example, *.api.example; valid until ")
    assert report.summary.endswith("covers eu.api.example")
    assert check_pair(NginxConfig()) is None  # TLS off


def test_each_fault_is_named(ca: CA, tmp_path: Path) -> None:
    now = datetime.datetime.now(datetime.UTC)
    expired = ca.issue(tmp_path, "old", not_before=now - 40 * DAY, not_after=now - DAY)
    early = ca.issue(tmp_path, "early", not_before=now + DAY, not_after=now + 9 * DAY)
    good = ca.issue(tmp_path, "good", ["api.example"])
    stray = other_key(tmp_path / "stray.key")
    cases = {
        "expired on": _nginx(expired.cert, expired.key),
        "is not valid before": _nginx(early.cert, early.key),
        "does not match the certificate": _nginx(good.cert, stray),
        "does not cover other.example (its names: api.example)": _nginx(
            good.cert, good.key, tls_host="other.example"
        ),
    }
    for fragment, nginx in cases.items():
        report = check_pair(nginx)
        assert report is not None and len(report.problems) == 1, (fragment, report)
        assert fragment in report.problems[0], report.problems


def test_a_key_others_may_read_is_refused_with_the_fix(ca: CA, tmp_path: Path) -> None:
    pair = ca.issue(tmp_path, "edge")
    pair.key.chmod(0o644)
    report = check_pair(_nginx(pair.cert, pair.key))
    assert report is not None
    assert report.problems == (
        f"nginx.tls_key {pair.key} has mode 0644: others may read it; run: chmod 600 {pair.key}",
    )


def test_files_that_are_not_a_pair_at_all(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not pem\n")
    junk.chmod(0o600)
    report = check_pair(_nginx(junk, junk))
    assert report is not None
    assert [p.split(": ", 1)[1] for p in report.problems] == [
        "not a PEM certificate",
        "not a PEM private key",
    ]
    missing = check_pair(_nginx(tmp_path / "none.crt", tmp_path / "none.key"))
    assert missing is not None and all("No such file" in p for p in missing.problems)


def test_names_cover_a_host_as_a_client_checks_them() -> None:
    assert covers(["a.example"], "A.Example.")
    assert covers(["*.a.example"], "x.a.example")
    assert not covers(["*.a.example"], "x.y.a.example") and not covers(["*.a.example"], "a.example")
    assert covers(["10.0.0.5"], "10.0.0.5") and covers(["::1"], "[::1]")
    assert not covers(["10.0.0.5"], "10.0.0.6") and not covers(["*.0.0.5"], "10.0.0.5")


def test_the_checked_host_is_tls_host_else_a_specific_listen_address() -> None:
    assert checked_host(NginxConfig(tls_host="api.example", listen="10.0.0.5")) == "api.example"
    assert checked_host(NginxConfig(listen="10.0.0.5")) == "10.0.0.5"
    assert checked_host(NginxConfig(listen="0.0.0.0")) is None
    assert checked_host(NginxConfig(listen="127.0.0.1")) is None

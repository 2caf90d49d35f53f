"""edge/kept_tls.py over real PEM files: the copies Nginx serves change only to a pair the checks
accepted, a staged pair goes live only on commit, and a refused stage leaves nothing to commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from hunyuan_serve.config import NginxConfig
from hunyuan_serve.edge.kept_tls import KeptPair
from tests.support.tls_certs import CA, Pair, make_ca, other_key


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca(tmp_path_factory.mktemp("ca"))


def _nginx(cert: Path, key: Path) -> NginxConfig:
    return NginxConfig.model_validate({"tls_cert": str(cert), "tls_key": str(key)})


def _served(kept: KeptPair, pair: Pair) -> tuple[bytes, bytes]:
    nginx = kept.served(_nginx(pair.cert, pair.key))
    return Path(str(nginx.tls_cert)).read_bytes(), Path(str(nginx.tls_key)).read_bytes()


def _bytes(pair: Pair) -> tuple[bytes, bytes]:
    return pair.cert.read_bytes(), pair.key.read_bytes()


def test_install_copies_a_good_pair_readable_by_its_owner_only(ca: CA, tmp_path: Path) -> None:
    pair = ca.issue(tmp_path / "pki", "front")
    kept = KeptPair(tmp_path / "run" / "tls")
    assert kept.install(_nginx(pair.cert, pair.key)) is None
    served = kept.served(_nginx(pair.cert, pair.key))
    assert Path(str(served.tls_cert)).parent == kept.directory
    assert _served(kept, pair) == _bytes(pair)
    assert kept.directory.stat().st_mode & 0o777 == 0o700
    assert Path(str(served.tls_key)).stat().st_mode & 0o777 == 0o600
    assert kept.summary is not None and "valid until" in kept.summary


def test_a_refused_pair_leaves_the_copies_served(ca: CA, tmp_path: Path) -> None:
    first, renewed = ca.issue(tmp_path / "a", "front"), ca.issue(tmp_path / "b", "front")
    kept = KeptPair(tmp_path / "tls")
    assert kept.install(_nginx(first.cert, first.key)) is None
    summary = kept.summary
    stray = other_key(tmp_path / "stray.key")
    refused = kept.install(_nginx(renewed.cert, stray))
    assert refused is not None and "does not match the certificate" in refused
    assert _served(kept, first) == _bytes(first) and kept.summary == summary


def test_a_staged_pair_is_served_only_once_committed(ca: CA, tmp_path: Path) -> None:
    first, renewed = ca.issue(tmp_path / "a", "front"), ca.issue(tmp_path / "b", "front")
    kept = KeptPair(tmp_path / "tls")
    assert kept.install(_nginx(first.cert, first.key)) is None
    assert kept.stage(_nginx(renewed.cert, renewed.key)) is None
    assert _served(kept, first) == _bytes(first)  # a reload refused after its read changes nothing
    kept.commit()
    assert _served(kept, first) == _bytes(renewed)


def test_a_refused_stage_leaves_nothing_to_commit(ca: CA, tmp_path: Path) -> None:
    first, renewed = ca.issue(tmp_path / "a", "front"), ca.issue(tmp_path / "b", "front")
    kept = KeptPair(tmp_path / "tls")
    assert kept.install(_nginx(first.cert, first.key)) is None
    assert kept.stage(_nginx(renewed.cert, renewed.key)) is None  # a reload read, then refused
    assert kept.stage(_nginx(renewed.cert, other_key(tmp_path / "stray.key"))) is not None
    kept.commit()  # the next accepted reload must not serve what an earlier one staged
    assert _served(kept, first) == _bytes(first)


def test_tls_off_copies_nothing_and_renders_as_configured(tmp_path: Path) -> None:
    kept = KeptPair(tmp_path / "tls")
    assert kept.install(NginxConfig()) is None
    assert kept.served(NginxConfig()) == NginxConfig()
    assert not kept.directory.exists() and kept.summary is None

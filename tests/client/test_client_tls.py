"""`translate` over TLS with a private CA: a real replica behind a real TLS server (Uvicorn with a
certificate a CA made here signs). --ca-file or SSL_CERT_FILE trusts it; without either the certificate
error stops the run at once, naming the option, instead of being retried as if the network were down."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from hunyuan_serve.client.cli import main
from hunyuan_serve.families import HY_MT15
from hunyuan_serve.replica.app import create_app
from tests.support.replica_fakes import FakeEngine, make_config
from tests.support.stacks import free_port
from tests.support.tls_certs import CA, make_ca

START_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Front:
    url: str  # https://localhost:PORT
    ca: CA


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Front]:
    """The replica app served over TLS with a leaf for localhost that a fresh private CA signed."""
    certs = tmp_path_factory.mktemp("tls")
    ca = make_ca(certs)
    pair = ca.issue(certs, "front")
    port = free_port()
    app = create_app(FakeEngine(), make_config(), HY_MT15)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        ssl_certfile=str(pair.cert),
        ssl_keyfile=str(pair.key),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:  # Uvicorn sets it once the socket listens; nothing to await across threads
        assert time.monotonic() < deadline and thread.is_alive(), "the TLS server did not start"
        time.sleep(0.01)
    try:
        yield Front(f"https://localhost:{port}", ca)
    finally:
        server.should_exit = True
        thread.join(10)


def _translate(
    front: Front, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, Path]:
    (tmp_path / "in.txt").write_text("Open the file\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    argv = ["--url", front.url, "--to", "zh", str(tmp_path / "in.txt"), "-o", str(out)]
    # Two retries at most, so that a client that retries the certificate error fails here in seconds.
    argv += ["--no-cache", "--no-progress", "--max-retries", "2", "--backoff-base-s", "0.01", *extra]
    code = main(argv)
    return code, capsys.readouterr().err, out


@pytest.fixture(autouse=True)
def _no_ca_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)


def test_the_ca_file_option_trusts_a_private_ca(
    front: Front, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err, out = _translate(front, tmp_path, capsys, "--ca-file", str(front.ca.cert))
    assert code == 0, err
    assert out.read_text(encoding="utf-8").strip() not in ("", "Open the file")


def test_ssl_cert_file_trusts_a_private_ca(
    front: Front, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(front.ca.cert))
    code, err, out = _translate(front, tmp_path, capsys)
    assert code == 0, err
    assert out.read_text(encoding="utf-8").strip() not in ("", "Open the file")


@pytest.mark.parametrize("own_ca", [False, True], ids=["default CAs", "another CA's file"])
def test_an_untrusted_certificate_stops_at_once_naming_the_option(
    front: Front, tmp_path: Path, capsys: pytest.CaptureFixture[str], own_ca: bool
) -> None:
    extra = ["--ca-file", str(make_ca(tmp_path / "other").cert)] if own_ca else []
    code, err, _ = _translate(front, tmp_path, capsys, *extra)
    assert code == 1 and "retry" not in err, err
    assert "certificate_error" in err and "CERTIFICATE_VERIFY_FAILED" in err and "--ca-file" in err, err


def test_a_ca_file_that_is_no_certificate_is_a_usage_error(
    front: Front, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("not a certificate\n", encoding="utf-8")
    for path in (tmp_path / "missing.pem", tmp_path / "notes.txt"):
        code, err, _ = _translate(front, tmp_path, capsys, "--ca-file", str(path))
        assert code == 2 and f"--ca-file: Value error, {path}: not a readable PEM CA certificate" in err, err

"""Fixtures of the client tests: a scripted stand-in service on a real local HTTP server, msgfmt's check."""

from __future__ import annotations

import codecs
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.scripted_service import ScriptedService, start_server

CATALOG_SUFFIXES = (".po", ".pot")


@pytest.fixture(scope="module")
def _service_server() -> Iterator[ScriptedService]:
    server, thread = start_server()
    try:
        yield ScriptedService(f"http://127.0.0.1:{server.server_address[1]}", server.state)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def service(_service_server: ScriptedService) -> ScriptedService:
    """The module's scripted server, with a clean script and request log for this test."""
    _service_server.state.reset()
    return _service_server


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        yield page
    finally:
        context.close()


def check_with_msgfmt(path: Path) -> None:
    """GNU msgfmt --check passes the catalog at path (a UTF-8 BOM taken off first: msgfmt 0.21 reads
    one as a syntax error, and the BOM is the encoding's, kept byte for byte, not the catalog's)."""
    program = shutil.which("msgfmt")
    assert program is not None, "msgfmt not found: deploy/install.sh installs gettext"
    data = path.read_bytes().removeprefix(codecs.BOM_UTF8)
    done = subprocess.run(
        [program, "--check", "-o", os.devnull, "-"], input=data, capture_output=True, check=False
    )
    assert done.returncode == 0, f"{path}: msgfmt --check: {done.stderr.decode('utf-8', 'replace')}"


@pytest.fixture
def msgfmt_check() -> Callable[[Path], None]:
    """check_with_msgfmt, for a test that checks a catalog itself (one a subprocess wrote)."""
    return check_with_msgfmt


@pytest.fixture(autouse=True)
def catalogs_checked(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every .po/.pot file `translate` writes in these tests is checked with msgfmt --check as it is
    written (a failure fails the test there); the paths checked, for a test that asks."""
    from hunyuan_serve.client import output

    checked: list[Path] = []
    write = output.write_atomic

    def write_and_check(path: Path, data: bytes) -> None:
        write(path, data)
        if path.suffix in CATALOG_SUFFIXES:
            check_with_msgfmt(path)
            checked.append(path)

    monkeypatch.setattr(output, "write_atomic", write_and_check)
    return checked

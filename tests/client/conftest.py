"""Fixtures of the client tests: a scripted stand-in service on a real local HTTP server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from scripted_service import ScriptedService, start_server


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

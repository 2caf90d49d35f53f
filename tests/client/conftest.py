"""Fixtures of the client tests: a scripted stand-in service on a real local HTTP server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
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


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium driven by playwright (no browser download); one per module.

    Not per session: playwright's sync API keeps an event loop running in the main thread while it
    is open, and asyncio.run() in later modules (the translate command, async tests) would then fail.
    """
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} missing: run deploy/install.sh (apt package chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        yield page
    finally:
        context.close()

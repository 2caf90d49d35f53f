"""Fixtures every test directory shares: the tiny random-weight checkpoints and the headless browser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A HunYuanDenseV1ForCausalLM checkpoint with random weights, built once per test session."""
    from hunyuan_serve.tiny_model import build_tiny_model

    # Named like the generation it imitates: `auto` picks the family from the name (families/detect.py).
    path = tmp_path_factory.mktemp("tiny-hunyuan-mt-")
    build_tiny_model(path)
    return path


@pytest.fixture(scope="session")
def tiny_family_dirs(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict[str, Path]:
    """One tiny checkpoint per generation (tiny_model.SPECS kind -> dir), each named like that generation."""
    from hunyuan_serve.tiny_model import SPECS, build_tiny_model

    dirs = {"hunyuan-mt": tiny_model_dir}
    for kind in SPECS:
        if kind not in dirs:
            dirs[kind] = build_tiny_model(tmp_path_factory.mktemp(f"tiny-{kind}-"), kind=kind)
    return dirs


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

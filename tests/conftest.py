"""Fixtures every test directory shares: the tiny random-weight checkpoints and the headless browser."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import demo_ahead, lanes
from tests.support import pools_stack as pools
from tests.support import restart_stack as restart
from tests.support.ahead import OfflineRuns, planned
from tests.support.shared_stack import (
    FIXTURE,
    KEYED_FIXTURE,
    POOLS_FIXTURE,
    RESTART_FIXTURE,
    SHARED_FIXTURES,
    SharedStack,
    Stoppable,
    last_users,
    launch,
    launch_keyed,
    light_modules_first,
)

# The shared stacks launched this session, and the test after which each may stop.
_LAUNCHED = pytest.StashKey[dict[str, Stoppable]]()
_LAST_USERS = pytest.StashKey[dict[str, str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    lanes.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    lanes.configure(config)
    # What the tests write (keys files, peer secrets, TLS keys) only their user may read, as an operator's
    # umask 077 makes it: `up`, `replica` and `gateway` refuse a secret file others may read. A test of
    # that refusal chmods its file open itself.
    os.umask(0o077)


@pytest.hookimpl(trylast=True)  # after -m/-k deselection: the lanes split what is really selected
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    lanes.keep_own_lane(config, items)
    items[:] = light_modules_first(items)
    config.stash[_LAST_USERS] = last_users(items, SHARED_FIXTURES)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """A shared stack stops after its last user, so the engines it holds leave the later tests' cores."""
    launched = item.session.stash.get(_LAUNCHED, {})
    for fixture, last in item.config.stash.get(_LAST_USERS, {}).items():
        if last == item.nodeid and fixture in launched:
            launched.pop(fixture).stop()


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


@pytest.fixture(scope="session", autouse=True)
def _shared_stacks_launched(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Stoppable]]:
    """Launches each shared stack at the session's start when a selected test will use it."""
    from hunyuan_serve.families import HY_MT15
    from hunyuan_serve.tiny_model import build_tiny_model

    launched = request.session.stash.setdefault(_LAUNCHED, {})
    wanted = request.config.stash.get(_LAST_USERS, {})  # only the fixtures some selected test asks for
    try:
        if FIXTURE in wanted:
            model: Path = request.getfixturevalue("tiny_model_dir")
            launched[FIXTURE] = launch(model, tmp_path_factory.mktemp("shared-stack"))
        if KEYED_FIXTURE in wanted:
            keyed_model = build_tiny_model(tmp_path_factory.mktemp(f"tiny-{HY_MT15}-"), kind=HY_MT15)
            launched[KEYED_FIXTURE] = launch_keyed(keyed_model, tmp_path_factory.mktemp("keyed-stack"))
        yield dict(launched)
    finally:
        while launched:
            launched.popitem()[1].stop()


@pytest.fixture(scope="session", autouse=True)
def _demo_model_converted_ahead(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Starts the demo model's conversion at the session's start when a selected test will load it."""
    log = tmp_path_factory.mktemp("demo-ahead") / "convert.log"
    proc = demo_ahead.convert_ahead(request.session.items, log)
    try:
        yield
    finally:
        demo_ahead.finish(proc)


@pytest.fixture(scope="session", autouse=True)
def offline_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OfflineRuns]:
    """Offline-engine runs the selected modules mark (tests/support/ahead.py), started ahead."""
    runs = OfflineRuns(tmp_path_factory.mktemp("offline-ahead"))
    try:
        for name, jobs_for in planned(request.session.items).items():
            runs.start(name, jobs_for(request))
        yield runs
    finally:
        runs.stop()


@pytest.fixture(scope="session")
def shared_stack(_shared_stacks_launched: dict[str, Stoppable]) -> SharedStack:
    """The open read-only tiny-model stack (tests/support/shared_stack.py): ready when it is returned."""
    stack = _shared_stacks_launched[FIXTURE]  # launched whenever a collected test asks for it
    assert isinstance(stack, SharedStack)
    stack.wait_ready()
    return stack


@pytest.fixture(scope="session")
def keyed_stack(_shared_stacks_launched: dict[str, Stoppable]) -> SharedStack:
    """The two-replica stack with a keys file (tests/support/shared_stack.py): ready when it is returned."""
    stack = _shared_stacks_launched[KEYED_FIXTURE]
    assert isinstance(stack, SharedStack)
    stack.wait_ready()
    return stack


@pytest.fixture(scope="session")
def restart_stack(
    request: pytest.FixtureRequest, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> restart.UpStack:
    """Two tiny replicas its modules kill and reload (tests/support/restart_stack.py), started at the
    first ask and stopped after the last user; ready when it is returned."""
    stack = restart.start(tiny_model_dir, tmp_path_factory.mktemp("restart-stack"))
    request.session.stash.setdefault(_LAUNCHED, {})[RESTART_FIXTURE] = stack
    stack.wait_ready()
    return stack


@pytest.fixture(scope="session")
def pools_stack(
    request: pytest.FixtureRequest, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> pools.PoolsStack:
    """The two pools (mt and the Chimera, tests/support/pools_stack.py), started at the first ask and
    stopped after the last user; ready when it is returned."""
    from hunyuan_serve.tiny_model import build_tiny_model

    chimera = build_tiny_model(tmp_path_factory.mktemp("tiny-chimera-"), kind="chimera")
    stack = pools.start(tiny_model_dir, chimera, tmp_path_factory.mktemp("pools-stack"))
    request.session.stash.setdefault(_LAUNCHED, {})[POOLS_FIXTURE] = stack
    stack.wait_ready()
    return stack


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

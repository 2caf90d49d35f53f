"""The image tests run only when asked (`make image-test`, `-m container`): never in `make test`'s lanes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import podman
from tests.support.podman import KEY


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # The marker expression names them (-m container); `make unit`'s and `make test`'s do not.
    if collection_path.name.startswith("test_") and "container" not in (config.getoption("markexpr") or ""):
        return True
    return None


@pytest.fixture(scope="session")
def image() -> str:
    podman.build("cpu")
    return podman.CPU_IMAGE


@pytest.fixture(scope="session")
def checkpoint(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint, readable by the image's user (a volume keeps the host's modes)."""
    copy = tmp_path_factory.mktemp("ckpt") / "hunyuan-mt-tiny"
    shutil.copytree(tiny_model_dir, copy)
    for path in [copy, *copy.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "keys.txt"
    path.write_text(KEY + "\n")
    path.chmod(0o644)
    return path

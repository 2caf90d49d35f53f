"""Fixtures every test directory shares: the tiny random-weight Hunyuan checkpoint."""

from __future__ import annotations

from pathlib import Path

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

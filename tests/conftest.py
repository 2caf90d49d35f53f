"""Fixtures every test directory shares: the tiny random-weight Hunyuan checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A HunYuanDenseV1ForCausalLM checkpoint with random weights, built once per test session."""
    from hunyuan_serve.tiny_model import build_tiny_model

    path = tmp_path_factory.mktemp("tiny-hunyuan")
    build_tiny_model(path)
    return path

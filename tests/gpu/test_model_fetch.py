"""The model `up` serves: a local path needs no network; a hub id it cannot fetch fails `up` at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hunyuan_serve.config import EngineConfig
from hunyuan_serve.families import DEFAULT_HUB_MODEL
from hunyuan_serve.models import ModelError, fetch_model, is_hub_id, model_config, resolve_model
from tests.support.stacks import free_ports


def _checkpoint(root: Path) -> Path:
    model = root / "Hunyuan-MT-7B"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "hunyuan_v1_dense"}), encoding="utf-8")
    return model


def test_a_local_path_is_served_as_it_is(tmp_path: Path) -> None:
    model = _checkpoint(tmp_path)
    assert not is_hub_id(str(model)) and is_hub_id("tencent/Hunyuan-MT-7B")
    assert fetch_model(EngineConfig(), str(model)) == model
    assert model_config(str(model))["model_type"] == "hunyuan_v1_dense"


def test_an_unreadable_local_model_fails_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no such directory"):
        fetch_model(EngineConfig(), str(tmp_path / "missing"))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError, match=r"cannot read config\.json"):
        model_config(str(tmp_path / "broken"))


def test_the_default_model_on_gpus_is_the_families_hub_model() -> None:
    assert resolve_model(EngineConfig(), on_gpu=True) == DEFAULT_HUB_MODEL
    assert resolve_model(EngineConfig(model="/m"), on_gpu=True) == "/m"


def _up(tmp_path: Path, model: str, **env: str) -> subprocess.CompletedProcess[str]:
    port, base_port = free_ports(2)
    argv = [sys.executable, "-m", "hunyuan_serve", "up", "--model", model, "--run-dir", str(tmp_path / "run")]
    argv += ["--port", str(port), "--base-port", str(base_port)]
    full = {**os.environ, "HF_HOME": str(tmp_path / "hf"), **env}
    full.pop("HF_HUB_CACHE", None)
    return subprocess.run(argv, env=full, capture_output=True, text=True, timeout=120, check=False)


def test_up_with_a_hub_id_offline_and_an_empty_cache_fails_at_once(tmp_path: Path) -> None:
    done = _up(tmp_path, "tencent/Hunyuan-MT-7B", HF_HUB_OFFLINE="1")
    assert done.returncode == 1, done.stderr
    assert "tencent/Hunyuan-MT-7B is not in the Hugging Face cache" in done.stderr
    assert "HF_HUB_OFFLINE=1 forbids downloading it" in done.stderr
    assert not (tmp_path / "run" / "events.jsonl").exists()  # no replica, no Nginx was started


def test_up_with_a_missing_local_model_fails_at_once(tmp_path: Path) -> None:
    done = _up(tmp_path, str(tmp_path / "no-such-model"), HF_HUB_OFFLINE="1")
    assert done.returncode == 1
    assert "no such directory" in done.stderr

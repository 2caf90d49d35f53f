"""doctor's model row without a model on a CPU: the demo model `up` serves, said converted (and where)
once it is, else that `up` converts it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hunyuan_serve import demo_model
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.doctor import gather, run_checks


def _model_row(cfg: ServeConfig) -> tuple[str, str]:
    row = next(c for c in run_checks(gather(cfg, "", "cpu", (), [])) if c.name == "model")
    return row.status, row.detail


def test_the_demo_model_is_said_converted_once_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    target = tmp_path / "hunyuan-serve" / "models" / demo_model.DEMO_MODEL_NAME
    assert _model_row(ServeConfig()) == (
        "skip",
        f"the CPU demo model (up converts it on first use, into {target})",
    )
    target.mkdir(parents=True)
    (target / "model.safetensors").write_bytes(b"")  # what is_complete looks at: the weights, the marker
    (target / demo_model.DONE_MARKER).write_text(json.dumps({"version": 1}))
    status, detail = _model_row(ServeConfig())
    assert (status, detail) == (
        "skip",
        f"the CPU demo model, converted in {target} (up updates its layout on first use)",
    )
    (target / demo_model.DONE_MARKER).write_text(json.dumps({"version": demo_model.LAYOUT_VERSION}))
    assert _model_row(ServeConfig()) == ("ok", f"the CPU demo model, converted in {target}")

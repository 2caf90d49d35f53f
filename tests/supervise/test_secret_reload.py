"""A reload that finds a secret file others may read is refused as `up` refuses it: the same message,
and `reload` exits 2 on it (a refusal for any other reason stays 1)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pytest

from hunyuan_serve.config import ConfigError, SecretFileError, build_config
from hunyuan_serve.supervise.command import reload_source
from hunyuan_serve.supervise.reload import outcome
from hunyuan_serve.supervise.rolling import Refused


def test_reload_refuses_a_keys_file_opened_since_up_with_exit_2(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("sk-0123456789abcdef\n")
    keys.chmod(0o600)
    config = tmp_path / "up.yaml"
    config.write_text(f"auth:\n  keys_file: {keys}\n")
    written = build_config({"auth": {"keys_file": str(keys)}}, {})
    source = reload_source(argparse.Namespace(config=str(config)), written, tmp_path)
    assert asyncio.run(source.read()).auth.keys_file == str(keys)
    keys.chmod(0o644)  # e.g. rewritten by a tool under umask 022
    with pytest.raises(SecretFileError) as refused:
        asyncio.run(source.read())
    assert f"auth.keys_file {keys} has mode 0644: others may read it; run: chmod 600 {keys}" == str(
        refused.value
    )
    end = Refused.of(refused.value)
    assert end.exit_code == 2
    event = {"event": "reload_refused", "reload": 4, "error": str(end), "exit_code": end.exit_code}
    assert outcome([event], 4) == (2, f"reload 4 refused, nothing was changed: {refused.value}")
    assert Refused.of(ConfigError("nginx.port: needs a full restart")).exit_code == 1

"""A GPU host behind a gateway as `up` and `render` see it: replicas on a private address, the secret."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hunyuan_serve.cli import main
from tests.gpu.test_cuda_untouched import _model

SECRET = "host-mode-secret-0123456789abcdef"


def test_up_refuses_a_private_replica_address_without_the_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["up", "--replica-host", "10.77.0.9", "--run-dir", str(tmp_path / "run"), "--replicas", "1"]
    assert main(argv) == 2  # a setting to change, refused like any invalid config
    err = capsys.readouterr().err
    assert "replica.host 10.77.0.9 is not loopback" in err and "auth.peer_secret_file" in err
    assert not (tmp_path / "run").exists()


def test_render_puts_the_private_address_everywhere_a_replica_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "peer.secret"
    secret.write_text(SECRET + "\n")
    argv = ["render", "nginx", "--replica-host", "10.77.0.9", "--nginx-listen", "10.77.0.9"]
    argv += ["--peer-secret-file", str(secret), "--replicas", "2", "--base-port", "8101", "--port", "8080"]
    # `render` places the model as `up` does (name, family): a checkpoint's config.json, no demo model.
    argv += ["--model", str(_model(tmp_path)), "--device", "cpu"]
    assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    assert re.findall(r"^\s+server (\S+) ", text, re.M) == ["10.77.0.9:8101", "10.77.0.9:8102"]
    assert "listen 10.77.0.9:8080;" in text
    assert f'if ($http_x_hunyuan_peer != "{SECRET}")' in text and "error_page 403 = @peer_refused;" in text
    # Every proxying location sends it: the upstream's, and a held request's (straight to a replica).
    assert text.count(f'proxy_set_header X-Hunyuan-Peer "{SECRET}";') == text.count("proxy_pass http://")
    body = re.search(r"location = /_hs/replicas \{[^}]*return 200 '([^']*)';", text)
    assert body is not None
    listing = json.loads(body.group(1))
    assert [(r["name"], r["addr"]) for r in listing["replicas"]] == [
        ("replica-0", "10.77.0.9:8101"),
        ("replica-1", "10.77.0.9:8102"),
    ]

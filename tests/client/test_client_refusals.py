"""Refusals that waiting cannot cure stop `translate` at once, naming the problem (a real key check)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.client.settings import API_KEY_ENV
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.families import HY_MT15
from hunyuan_serve.replica.app import create_app
from tests.support.replica_fakes import FakeEngine, serve_in_thread, wait_ready
from tests.support.scripted_service import requests_seen

RIGHT_KEY, WRONG_KEY = "sk-right-key-5f4e3d", "sk-wrong-key-0a9b8c"


def _translate(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, dict[str, Any]]:
    (tmp_path / "in.txt").write_text("line 1\nline 2\n", encoding="utf-8")
    report = tmp_path / "report.json"
    argv = ["--url", url, "--to", "zh", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt")]
    argv += ["--no-cache", "--no-progress", "--report", str(report)]
    # One retry at most, so that today's client, which waits out a 429, fails here in seconds.
    code = main([*argv, "--max-retries", "1"])
    _, err = capsys.readouterr()
    return code, err, json.loads(report.read_text()) if report.exists() else {}


@pytest.mark.parametrize("throttled", [False, True], ids=["wrong key", "wrong key, address throttled"])
def test_a_wrong_key_stops_the_run_at_once_naming_the_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, throttled: bool
) -> None:
    """A replica with a keys file refuses a wrong key 403; past auth.bad_key_limit the address gets
    429 too_many_bad_keys with a Retry-After instead. Neither is cured by waiting: one request, no retry."""
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{RIGHT_KEY}\n", encoding="utf-8")
    # Throttled: the address's first wrong key is its limit; else far more than this test sends.
    auth = {"keys_file": str(keys), "bad_key_limit": 1 if throttled else 100, "bad_key_retry_after_s": 2}
    cfg = ServeConfig.model_validate(
        {"auth": auth, "replica": {"cache_entries": 100}, "run_dir": str(tmp_path)}
    )
    app = create_app(FakeEngine(), cfg, HY_MT15)
    sent = requests_seen(app)

    monkeypatch.setenv(API_KEY_ENV, WRONG_KEY)
    with serve_in_thread(app) as url:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {WRONG_KEY}"}) as http:
            wait_ready(http)
            if throttled:  # the limit's one wrong key, then the one past it: the address is slowed
                assert http.post("/translate", json={"text": "x", "target_lang": "zh"}).status_code == 403
                answer = http.post("/translate", json={"text": "x", "target_lang": "zh"})
                assert answer.json()["error"]["code"] == "too_many_bad_keys"
        sent.clear()
        code, err, report = _translate(url, tmp_path, capsys)
    refusal = "429 too_many_bad_keys: too many wrong API keys" if throttled else "403 invalid_api_key"
    assert code == 1 and sent.count("POST /translate") == 1 and "retry 1 of" not in err, err
    assert f"stopped sending: service error: {refusal}" in err and report["failed"] == 2

"""API keys end to end: `up` (Nginx + vLLM replicas on a tiny model) with auth.keys_file set: the keyed
shared stack (tests/support/shared_stack.py), which has this module's keys among others'."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.shared_stack import KEYS, SharedStack
from tests.support.stacks import free_ports, tiny_up

pytestmark = [pytest.mark.engine, pytest.mark.nginx]

KEY = KEYS["keys"].secret


@dataclass
class Stack:
    url: str
    run: Path


def _up_args(model: Path, work: Path, port: int, base: int) -> list[str]:
    return tiny_up(model, work / "run", port, base, max_tokens=8)


@pytest.fixture(scope="module")
def stack(keyed_stack: SharedStack) -> Stack:
    return Stack(keyed_stack.url, keyed_stack.run_dir)


def test_translate_needs_a_key_and_logs_none(stack: Stack) -> None:
    body = {"text": "Hello", "source_lang": "en", "target_lang": "zh"}
    with httpx.Client(base_url=stack.url, trust_env=False, timeout=120) as http:
        assert http.get("/health").status_code == 200
        missing = http.post("/translate", json=body)
        assert missing.status_code == 401 and missing.json()["error"]["code"] == "missing_api_key"
        wrong = http.post("/translate", json=body, headers={"Authorization": "Bearer sk-nope"})
        assert wrong.status_code == 403 and wrong.json()["error"]["code"] == "invalid_api_key"
        good = http.post("/translate", json=body, headers={"Authorization": f"Bearer {KEY}"})
        assert good.status_code == 200 and isinstance(good.json()["result"], str), good.text
        by_url = http.get("/languages", params={"token": KEY})
        assert by_url.status_code == 200 and by_url.json()
    # Neither Nginx's access log nor the replica's log lines name a key.
    logs = [*stack.run.glob("nginx/logs/*.log"), *stack.run.glob("logs/*.log")]
    assert logs and not [p for p in logs if KEY in p.read_text(errors="replace")]
    # The replica read the same keys file from the config up wrote for it.
    assert any("keys.txt" in p.read_text() for p in stack.run.glob("**/replica-*.yaml"))


def test_up_refuses_a_public_listen_without_keys(tiny_model_dir: Path, tmp_path: Path) -> None:
    port, base = free_ports(2)
    cmd = [*_up_args(tiny_model_dir, tmp_path, port, base), "--nginx-listen", "0.0.0.0"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "auth.keys_file" in out.stderr and "not loopback" in out.stderr, out.stderr
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_official_clients_send_their_keys_and_read_the_refusals(stack: Stack) -> None:
    import deepl
    import openai
    from libretranslatepy import LibreTranslateAPI

    good = openai.OpenAI(base_url=stack.url + "/v1", api_key=KEY, max_retries=0)
    assert [m.id for m in good.models.list()]
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-nope", max_retries=0).models.list()
    assert deepl.Translator(KEY, server_url=stack.url).get_usage() is not None
    with pytest.raises(deepl.AuthorizationException):
        deepl.Translator("sk-nope", server_url=stack.url).get_usage()
    assert LibreTranslateAPI(stack.url + "/libretranslate/", api_key=KEY).languages()
    # Its language list is open, as on LibreTranslate itself (Weblate asks it with no key); a
    # translation with a wrong key is refused.
    assert LibreTranslateAPI(stack.url + "/libretranslate/", api_key="sk-nope").languages()
    with pytest.raises(Exception, match="403"):
        LibreTranslateAPI(stack.url + "/libretranslate/", api_key="sk-nope").translate("Hello", "en", "de")


def test_the_translate_cli_sends_its_key_and_names_the_refusal_without_one(
    stack: Stack, tmp_path: Path
) -> None:
    import deepl

    from hunyuan_serve.client.settings import API_KEY_ENV
    from tests.support.stacks import cli

    def counted() -> int:
        count = deepl.Translator(KEY, server_url=stack.url).get_usage().character.count
        assert count is not None
        return count

    src = tmp_path / "in.txt"
    # A line no other test sends, so the replicas' shared cache cannot answer it from another test.
    src.write_text("The key's own line, sent by the translate CLI.\n", encoding="utf-8")
    cmd = cli("translate", "--url", stack.url, "--to", "de", "--no-cache", "--no-progress", str(src))
    env = {k: v for k, v in os.environ.items() if k != API_KEY_ENV}
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert refused.returncode != 0 and "missing_api_key" in refused.stderr, refused.stderr
    before = counted()
    given = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**env, API_KEY_ENV: KEY})
    # The key reached the service: it counted this line against the key. The tiny model's random answer
    # may still be refused by the client's own checks (a control character), which no key causes.
    assert counted() > before, given.stderr
    assert "api_key" not in given.stderr, given.stderr
    answered = given.returncode == 0 and given.stdout.strip()
    assert answered or "failed line 1: control characters" in given.stderr, given.stderr
    assert KEY not in given.stderr + given.stdout

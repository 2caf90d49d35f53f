"""Ensemble on real replicas: a tiny translation checkpoint samples the candidates, a tiny Chimera fuses them.

Three replica processes: the Chimera; two translation replicas whose chimera_url is the Chimera's own
port (no front needed), one degrading when it fails, one refusing (503). The Chimera is killed last.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from hunyuan_serve.families.chimera import fusion_prompt
from hunyuan_serve.languages import find_language
from tests.support.stacks import cli, free_port, http_ok, started, wait_until

pytestmark = pytest.mark.engine

STARTUP_TIMEOUT_S = 600
CHIMERA_NAME = "hunyuan-mt-chimera-tiny"
MAX_TOKENS = 8


@dataclass
class Proc:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def metric(self, name: str) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.MULTILINE)
        return float(match.group(1)) if match else 0.0

    def log_line(self, request_id: str) -> dict[str, Any]:
        lines = [
            json.loads(line)
            for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines()
            if line.startswith('{"request_id"') and json.loads(line)["request_id"] == request_id
        ]
        assert len(lines) == 1, f"{request_id}: {lines}"
        return lines[0]


def _argv(model: Path, port: int, *extra: str) -> list[str]:
    return cli(
        "replica", "--model", str(model), "--port", str(port), "--max-model-len", "1024",
        "--kv-cache-memory-bytes", str(128 * 2**20), "--enforce-eager", "true", "--max-num-seqs", "16",
        "--max-tokens", str(MAX_TOKENS), *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def replicas(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Proc]]:
    """chimera, mt (degrades), strict (503): started at once, each waited for until ready."""
    from hunyuan_serve.tiny_model import build_tiny_model

    work = tmp_path_factory.mktemp("ensemble")
    chimera_dir = build_tiny_model(tmp_path_factory.mktemp("tiny-chimera-"), kind="chimera")
    ports = {name: free_port() for name in ("chimera", "mt", "strict")}
    chimera_url = f"http://127.0.0.1:{ports['chimera']}"
    argvs = {
        "chimera": _argv(chimera_dir, ports["chimera"], "--served-model-name", CHIMERA_NAME),
        "mt": _argv(tiny_model_dir, ports["mt"], "--chimera-url", chimera_url),
        "strict": _argv(tiny_model_dir, ports["strict"], "--chimera-url", chimera_url,
                        "--chimera-failure", "refuse"),
    }  # fmt: skip
    # Test-only: random weights emit EOS at once; ignoring it makes every candidate MAX_TOKENS long.
    env = {**os.environ, "HUNYUAN_SERVE_TEST_IGNORE_EOS": "1"}
    with contextlib.ExitStack() as stack:
        procs: dict[str, Proc] = {}
        for name, argv in argvs.items():
            log = work / f"{name}.log"
            proc = stack.enter_context(started(argv, log=log, env=env))
            procs[name] = Proc(proc, f"http://127.0.0.1:{ports[name]}", log)
        for each in procs.values():
            wait_until(each.proc, each.log, http_ok(f"{each.url}/health"), STARTUP_TIMEOUT_S, "ready")
        yield procs


def _ensemble(proc: Proc, request_id: str, **fields: Any) -> httpx.Response:
    body = {"source_lang": "en", "target_lang": "zh", "ensemble": {"candidates": 3}, **fields}
    return httpx.post(f"{proc.url}/translate", json=body, headers={"X-Request-ID": request_id}, timeout=120)


def test_candidates_come_from_one_engine_request_and_the_chimera_fuses_them(
    replicas: dict[str, Proc],
) -> None:
    mt, chimera = replicas["mt"], replicas["chimera"]
    calls = mt.metric("hunyuan_engine_latency_seconds_count")
    tokens = mt.metric("hunyuan_generation_tokens_total")
    response = _ensemble(mt, "ens-1", text="Hello, world.")
    assert response.status_code == 200, response.text
    answer = response.json()
    candidates = answer["candidates"]
    assert len(candidates) == 3 and all(isinstance(c, str) and c for c in candidates), candidates
    assert answer["fused_by"] == CHIMERA_NAME and isinstance(answer["result"], str)
    assert response.headers["X-Hunyuan-Fusion"] == f"fused; by={CHIMERA_NAME}"
    # One engine call (vLLM's n=3), its three sequences generated side by side, MAX_TOKENS each.
    assert mt.metric("hunyuan_engine_latency_seconds_count") - calls == 1
    assert mt.metric("hunyuan_generation_tokens_total") - tokens == 3 * MAX_TOKENS
    assert mt.metric("hunyuan_engine_max_running") >= 3
    line = mt.log_line("ens-1")
    assert (line["status"], line["ensemble"], line["fused"], line["output_tokens"]) == (
        200,
        3,
        1,
        3 * MAX_TOKENS,
    )
    # The Chimera served exactly the README prompt of these candidates, from its engine.
    prompt = fusion_prompt(find_language("en"), find_language("zh"), "Hello, world.", candidates)
    digest = hashlib.sha256(prompt.messages[0]["content"].encode("utf-8")).hexdigest()
    fused = chimera.log_line("ens-1-fuse0")
    assert (fused["status"], fused["candidates"], fused["prompt_sha256"]) == (200, 3, digest)
    assert fused["cached"] is False and fused["output_tokens"] == MAX_TOKENS and fused["input_tokens"] > 50


def test_a_batch_fuses_each_text(replicas: dict[str, Proc]) -> None:
    response = _ensemble(
        replicas["mt"], "ens-batch", texts=["Open file", "Guten Morgen"], ensemble={"candidates": 2}
    )
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [len(each["candidates"]) for each in results] == [2, 2]
    assert [each["fused_by"] for each in results] == [CHIMERA_NAME, CHIMERA_NAME]
    for index in range(2):
        assert replicas["chimera"].log_line(f"ens-batch-fuse{index}")["candidates"] == 2


@pytest.mark.parametrize(
    ("name", "path", "body", "code", "message"),
    [
        ("mt", "/translate", {"text": "Hi", "ensemble": {"candidates": 1}}, "invalid_ensemble", "got 1"),
        ("mt", "/translate", {"text": "Hi", "ensemble": {"candidates": 9}}, "invalid_ensemble", "got 9"),
        ("mt", "/fuse", {"text": "Hi", "candidates": ["a", "b"]}, "fusion_unsupported", "family hunyuan-mt"),
        ("chimera", "/translate", {"text": "Hi"}, "fusion_only", f"{CHIMERA_NAME} is a Hunyuan-MT-Chimera"),
    ],
)  # fmt: skip
def test_bad_input_is_a_400_naming_it(
    replicas: dict[str, Proc], name: str, path: str, body: dict[str, Any], code: str, message: str
) -> None:
    body = {"source_lang": "en", "target_lang": "zh", **body}
    response = httpx.post(f"{replicas[name].url}{path}", json=body, timeout=30)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == code and message in error["message"]


def test_with_the_chimera_killed_answers_degrade_or_refuse(replicas: dict[str, Proc]) -> None:
    chimera = replicas["chimera"].proc
    os.killpg(chimera.pid, signal.SIGKILL)  # the replica and its engine core, at once (kill -9)
    chimera.wait(30)
    response = _ensemble(replicas["mt"], "ens-down", text="Good night")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["fused_by"] is None and answer["result"] == answer["candidates"][0]
    assert len(answer["candidates"]) == 3
    assert response.headers["X-Hunyuan-Fusion"] == "degraded; texts=1/1; reason=unreachable (ConnectError)"
    assert replicas["mt"].log_line("ens-down")["fusion_degraded"] == "unreachable (ConnectError)"
    strict = _ensemble(replicas["strict"], "ens-strict", text="Good night")
    assert strict.status_code == 503, strict.text
    error = strict.json()["error"]
    assert error["code"] == "fusion_unavailable" and "unreachable (ConnectError)" in error["message"]

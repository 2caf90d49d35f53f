"""Two pools in one real `up` on CPU: a tiny Hunyuan-MT (pool mt, chimera_pool chimera) and a tiny
Hunyuan-MT-Chimera (pool chimera).

Through Nginx: each model answered by its own pool (the real openai client); an ensemble's candidates
sampled in one engine request (vLLM's n) and fused by the Chimera replica (its log names the fused
prompt's digest); the Chimera killed (-9) under ensemble load: nothing fails, answers degrade to the
first candidate while it is gone and are fused again once it is back. The suite's `pools_stack` serves it
(shared with tests/supervise/test_pools_e2e.py, which reloads pool chimera). Heavy:
`flock /tmp/hs-heavy.lock timeout 900 .venv/bin/pytest -s -q tests/api/test_route_by_model_e2e.py`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from hunyuan_serve.families.chimera import fusion_prompt
from hunyuan_serve.languages import find_language
from tests.support.load import Load
from tests.support.pools_stack import MAX_TOKENS, START_TIMEOUT_S, PoolsStack
from tests.support.stacks import wait_until

READMIT_TIMEOUT_S = 300.0  # the Chimera's engine started again while the other pool serves
CANDIDATES = 3

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.e2e,
    pytest.mark.skipif(not Path("/usr/lib/nginx/modules/ngx_http_js_module.so").exists(), reason="no njs"),
    pytest.mark.timeout(START_TIMEOUT_S + READMIT_TIMEOUT_S + 240),
]


def _replica(stack: PoolsStack, name: str) -> dict[str, Any]:
    return stack.replicas()[name]


def _chimera_log(stack: PoolsStack) -> Path:
    """The Chimera replica's log now (a reload of its pool starts one of its own)."""
    return Path(_replica(stack, "chimera-0")["log"])


def _routes_by_model(base: str, served: dict[str, str]) -> None:
    api = openai.OpenAI(base_url=f"{base}/v1", api_key="x", http_client=httpx.Client(trust_env=False))
    assert [m.id for m in api.models.list().data] == [served["mt"], served["chimera"]]
    messages: Any = [{"role": "user", "content": "Translate the following segment into Chinese: Hi"}]
    for model in (served["mt"], served["chimera"], served["mt"]):
        chat = api.chat.completions.create(model=model, messages=messages, max_tokens=4)
        assert chat.model == model
    with pytest.raises(openai.NotFoundError) as unknown:
        api.chat.completions.create(model="gpt-4o", messages=messages)
    assert unknown.value.code == "model_not_found"
    with httpx.Client(base_url=base, trust_env=False, timeout=60) as http:
        body = {"text": "Hi", "source_lang": "en", "target_lang": "zh"}
        answer = http.post("/translate", json={**body, "model": served["mt"]})
        assert answer.status_code == 200 and answer.json()["model"] == served["mt"], answer.text
        # The Chimera pool got it: it fuses candidates and refuses a plain translation, in its own words.
        fused_only = http.post("/translate", json={**body, "model": served["chimera"]})
        assert fused_only.status_code == 400 and fused_only.json()["error"]["code"] == "fusion_only"
        assert http.post("/translate", json=body).json()["model"] == served["mt"]  # no model: the first
        missing = http.post("/translate", json={**body, "model": "nope"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
        health = http.get("/health").json()
        assert health["status"] == "ready" and set(health["pools"]) == {"mt", "chimera"}


def _fusion_logged(log: Path, request_id: str) -> dict[str, Any]:
    """The Chimera replica's log line of the fusion made for request_id (its /fuse call's own id)."""
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("{") and f'"{request_id}-fuse0"' in line:
            entry: dict[str, Any] = json.loads(line)
            return entry
    raise AssertionError(f"no fusion of {request_id} in {log}")


def _metric(addr: str, name: str) -> float:
    """One sample of the replica's own /metrics (read straight from it, on loopback: no key needed)."""
    text = httpx.get(f"http://{addr}/metrics", timeout=10, trust_env=False).text
    match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _ensemble_fused(stack: PoolsStack) -> None:
    base, served = stack.url, stack.served
    body = {"text": "Open the settings", "source_lang": "en", "target_lang": "zh"}
    mt = _replica(stack, "mt-0")["addr"]
    calls = _metric(mt, "hunyuan_engine_latency_seconds_count")
    tokens = _metric(mt, "hunyuan_generation_tokens_total")
    with httpx.Client(base_url=base, trust_env=False, timeout=120) as http:
        answer = http.post(
            "/translate",
            json={**body, "ensemble": {"candidates": CANDIDATES}},
            headers={"X-Request-ID": "ens-1"},
        )
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert len(got["candidates"]) == CANDIDATES and all(got["candidates"])
    assert got["fused_by"] == served["chimera"] and got["model"] == served["mt"]
    assert answer.headers["X-Hunyuan-Fusion"] == f"fused; by={served['chimera']}"
    # The candidates are one engine request with vLLM's n: one engine call, n x max_tokens generated,
    # sequences running at once.
    assert _metric(mt, "hunyuan_engine_latency_seconds_count") - calls == 1
    assert _metric(mt, "hunyuan_generation_tokens_total") - tokens == CANDIDATES * MAX_TOKENS
    assert _metric(mt, "hunyuan_engine_max_running") >= CANDIDATES
    prompt = fusion_prompt(find_language("en"), find_language("zh"), body["text"], got["candidates"])
    digest = hashlib.sha256(prompt.messages[0]["content"].encode("utf-8")).hexdigest()
    logged = _fusion_logged(_chimera_log(stack), "ens-1")
    assert (logged["candidates"], logged["prompt_sha256"], logged["status"]) == (CANDIDATES, digest, 200)


def _batch_and_bad_input(base: str, stack: PoolsStack) -> None:
    """A batch fused text by text; bad ensembles, /fuse on a translation replica, plain /translate on the
    Chimera: 400s naming them (the last two straight through the pools' internal routes)."""
    body = {"source_lang": "en", "target_lang": "zh"}
    with httpx.Client(base_url=base, trust_env=False, timeout=120) as http:
        batch = http.post(
            "/translate",
            json={**body, "texts": ["Open file", "Guten Morgen"], "ensemble": {"candidates": 2}},
            headers={"X-Request-ID": "ens-batch"},
        )
        assert batch.status_code == 200, batch.text
        assert [len(each["candidates"]) for each in batch.json()["results"]] == [2, 2]
        assert all(each["fused_by"] for each in batch.json()["results"])
        for n in (1, 9):
            bad = http.post("/translate", json={**body, "text": "Hi", "ensemble": {"candidates": n}})
            assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_ensemble", bad.text
            assert f"got {n}" in bad.json()["error"]["message"]
        fuse = http.post("/_hs/pool/mt/fuse", json={**body, "text": "Hi", "candidates": ["a", "b"]})
        assert fuse.status_code == 400 and fuse.json()["error"]["code"] == "fusion_unsupported", fuse.text
        alone = http.post("/_hs/pool/chimera/translate", json={**body, "text": "Hi"})
        assert alone.status_code == 400 and alone.json()["error"]["code"] == "fusion_only", alone.text
    log = _chimera_log(stack)
    assert _fusion_logged(log, "ens-batch")["candidates"] == 2
    assert any('"ens-batch-fuse1"' in line for line in log.read_text(encoding="utf-8").splitlines())


def _chimera_killed_under_load(stack: PoolsStack) -> None:
    base, served, proc, log = stack.url, stack.served, stack.proc, stack.log
    chimera = _replica(stack, "chimera-0")
    with Load(base, threads=2, pause_s=0.1, extra={"ensemble": {"candidates": 2}}) as load:
        load.wait_ok(4)
        killed_at = time.time()
        os.killpg(chimera["pid"], signal.SIGKILL)
        wait_until(proc, log, lambda: _replica(stack, "chimera-0")["pid"] != chimera["pid"], 60, "restarted")
        wait_until(proc, log, stack.ready, READMIT_TIMEOUT_S, "the Chimera readmitted")
        readmitted_at = time.time()
        deadline = time.monotonic() + 60
        while not [s for s in load.answered(readmitted_at) if s.fused_by]:
            assert time.monotonic() < deadline, "no fused answer after the Chimera came back"
            time.sleep(0.2)
    assert load.failures == [], load.failures[:5]
    during = [s for s in load.answered() if killed_at < s.start < readmitted_at]
    degraded = [s for s in during if s.fused_by is None]
    assert degraded, "no answer degraded while the Chimera was down"
    assert all(s.model == served["mt"] for s in load.answered())
    print(
        f"\nChimera killed: {len(load.sent)} ensemble requests, 0 failed, {len(degraded)} of {len(during)} "
        f"answered while it was gone degraded to the first candidate; readmitted after "
        f"{readmitted_at - killed_at:.1f} s"
    )


def test_pools_route_by_model_and_the_chimera_fuses_or_degrades(pools_stack: PoolsStack) -> None:
    pools_stack.wait_ready(READMIT_TIMEOUT_S)  # an earlier user may have restarted a replica
    _routes_by_model(pools_stack.url, pools_stack.served)
    _ensemble_fused(pools_stack)
    _batch_and_bad_input(pools_stack.url, pools_stack)
    _chimera_killed_under_load(pools_stack)

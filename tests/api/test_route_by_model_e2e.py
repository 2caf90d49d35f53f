"""Routing by model on a real `up` of two tiny pools (a Hunyuan-MT and an HY-MT1.5 on CPU), through the
real openai client: each answer comes from the pool of the model asked for. Heavy:
`flock /tmp/hs-heavy.lock timeout 900 .venv/bin/pytest -s -q tests/api/test_route_by_model_e2e.py`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from hunyuan_serve.fleet.state import read_state
from tests.support.stacks import cli, free_ports, started, tiny_engine, wait_until

START_TIMEOUT_S = 420.0  # two vLLM CPU engines loading on two shared cores

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.e2e,
    pytest.mark.skipif(not Path("/usr/lib/nginx/modules/ngx_http_js_module.so").exists(), reason="no njs"),
    pytest.mark.timeout(START_TIMEOUT_S + 180),
]


def _ready(run_dir: Path) -> bool:
    state = read_state(run_dir)
    if state is None:
        return False
    replicas = state["replicas"]
    return all(r["state"] == "ready" for r in replicas) and state["nginx"]["ready"] == len(replicas)


def _settings(work: Path, mt: Path, mt15: Path) -> tuple[dict[str, Any], int]:
    port, base, *_ = free_ports(5)
    engine = {k: v for k, v in tiny_engine(mt).items() if k != "model"}
    return {
        "base_port": base,
        "run_dir": str(work / "run"),
        "engine": engine,
        "replica": {"max_tokens": 8},
        "pools": [
            {"name": "mt", "model": str(mt), "replicas": 1},
            {"name": "mt15", "model": str(mt15), "replicas": 1},
        ],
        "supervisor": {"probe_interval_s": 0.25, "startup_timeout_s": 400.0},
        "nginx": {"port": port, "worker_processes": 1, "read_timeout_s": 120.0},
    }, port


def test_each_model_is_answered_by_its_own_pool(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from hunyuan_serve.tiny_model import build_tiny_model

    work = tmp_path_factory.mktemp("route")
    mt15 = build_tiny_model(tmp_path_factory.mktemp("tiny-hy-mt1.5-"), seed=1, kind="hy-mt1.5")
    settings, port = _settings(work, tiny_model_dir, mt15)
    config, log, run_dir = work / "up.yaml", work / "up.log", work / "run"
    config.write_text(yaml.safe_dump(settings))
    served = {"mt": str(tiny_model_dir), "mt15": str(mt15)}
    with started(cli("up", "--config", str(config)), log=log) as proc:
        t0 = time.time()
        wait_until(proc, log, lambda: _ready(run_dir), START_TIMEOUT_S, "both pools ready")
        print(f"\nboth pools ready after {time.time() - t0:.1f} s")
        base = f"http://127.0.0.1:{port}"
        api = openai.OpenAI(base_url=f"{base}/v1", api_key="x", http_client=httpx.Client(trust_env=False))
        assert [m.id for m in api.models.list().data] == [served["mt"], served["mt15"]]
        for model in (served["mt"], served["mt15"], served["mt"]):
            messages: Any = [{"role": "user", "content": "Translate the following segment into Chinese: Hi"}]
            chat = api.chat.completions.create(model=model, messages=messages, max_tokens=4)
            assert chat.model == model
        with pytest.raises(openai.NotFoundError) as unknown:
            api.chat.completions.create(model="gpt-4o", messages=messages)
        assert unknown.value.code == "model_not_found"
        with httpx.Client(base_url=base, trust_env=False, timeout=60) as http:
            for model in served.values():
                answer = http.post(
                    "/translate",
                    json={"text": "Hi", "source_lang": "en", "target_lang": "zh", "model": model},
                )
                assert answer.status_code == 200 and answer.json()["model"] == model, answer.text
            plain = http.post("/translate", json={"text": "Hi", "source_lang": "en", "target_lang": "zh"})
            assert plain.json()["model"] == served["mt"]  # no model: the default pool (the first)
            missing = http.post("/translate", json={"text": "Hi", "target_lang": "zh", "model": "nope"})
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
            health = http.get("/health").json()
            assert health["status"] == "ready" and set(health["pools"]) == {"mt", "mt15"}
